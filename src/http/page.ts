import type { PageSize } from '../limits.js';

type Query = Readonly<Record<string, unknown>>;

/** The items one unit of a list's cost pays for: a page of up to this many costs its route's cost once. */
export const PAGE_ITEMS = 100;

/** A list's `limit` query parameter: 1 to the page's most, its default when the query names none. */
export const pageLimit = (size: PageSize) => ({ type: 'integer', minimum: 1, maximum: size.max, default: size.default }) as const;

/**
 * A paged route's `scale`: a unit per PAGE_ITEMS items its `limit` asks for (the page's default when it
 * asks for none, its most at most), times `weight` for what the query adds to each item. It reads the
 * query as sent, before validation, as the limiter runs first.
 */
export function perPage(size: PageSize, weight: (query: Query) => number = () => 1) {
  return (query: Query): number => {
    const asked = Number(query.limit);
    const items = Number.isFinite(asked) && asked >= 1 ? Math.min(asked, size.max) : size.default;
    return Math.ceil(items / PAGE_ITEMS) * weight(query);
  };
}
