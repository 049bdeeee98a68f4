type Query = Readonly<Record<string, unknown>>;

/** The items one unit of a list's cost pays for: a page of up to this many costs its route's cost once. */
export const PAGE_ITEMS = 100;

/**
 * A paged route's `scale`: a unit per PAGE_ITEMS items its `limit` asks for (the schema's default when
 * it asks for none, its maximum at most), times `weight` for what the query adds to each item. It reads
 * the query as sent, before validation, as the limiter runs first.
 */
export function perPage(limit: { default: number; maximum: number }, weight: (query: Query) => number = () => 1) {
  return (query: Query): number => {
    const asked = Number(query.limit);
    const items = Number.isFinite(asked) && asked >= 1 ? Math.min(asked, limit.maximum) : limit.default;
    return Math.ceil(items / PAGE_ITEMS) * weight(query);
  };
}
