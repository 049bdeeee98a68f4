/**
 * The size limits of free-form input (docs/api.md, "Limits"): the one home that the route schemas,
 * schemas/baseline.schema.json (checked against it by test/limits.test.ts), the code and the docs
 * test read.
 *
 * Strings are bounded in characters, as JSON Schema's `maxLength` counts them (Unicode code
 * points); a code point is at most 4 bytes of UTF-8, so a string of n characters is at most 4n
 * bytes. JSON documents (an event's `detail`, a match replay) are bounded in bytes of their UTF-8
 * JSON text, through the `x-max-json-bytes` schema keyword (src/http/json-body.ts).
 */

/** The largest token bucket (RATE_LIMIT_CAPACITY): its arithmetic in micro-tokens stays an exact integer below it. */
export const MAX_CAPACITY = 10_000_000;

/** Every request body, in bytes (answered 413 above it). */
export const BODY_LIMIT = 1024 * 1024;

/** The longest string of each kind, in characters. */
export const TEXT_LIMITS = {
  /** Names of persons, zones, nodes, bots and API tokens. */
  name: 200,
  /** A sensing event's `blob_id`. */
  blob_id: 128,
  /** A baseline record's `notes`. */
  notes: 4096,
  /** A baseline record's `commit_url`. */
  url: 2048,
  /** A baseline record's `timestamp` (RFC 3339 allows any number of fraction digits). */
  timestamp: 64,
  /** A PEM text in the MQTT settings: a CA certificate, a client certificate with its chain, a client key. */
  pem: 65536,
} as const;

/** The largest JSON document of each kind, in bytes of its UTF-8 JSON text. */
export const JSON_LIMITS = {
  /** An `anomaly.detected` event's `detail`, as the sensing node sends it. */
  detail: 4096,
  /** A match's `replay`. */
  replay: 512 * 1024,
} as const;

/**
 * A baseline record, in bytes as sent: it is stored byte for byte, so white space or a number's
 * digits would otherwise let one record take the whole body limit, and a list page 500 of them.
 * The schema bounds every string: its longest record with every character written as a `\u`
 * escape (Python's `json.dumps` escapes all but ASCII), keys included, is under 80 KB.
 */
export const BASELINE_RECORD_LIMIT = 128 * 1024;

/**
 * An enrichment request's body, `{"match_id"}`, in bytes: the route is signed, so its client address
 * is charged only once the signature is checked, after the body was read and parsed, and a large body
 * would make every refused request costly. An id written entirely in escapes is 384 bytes.
 */
export const ENRICHMENT_REQUEST_LIMIT = 4096;

/** Commentary, in bytes of UTF-8: a longer answer (from an LLM endpoint) is cut at this size. */
export const COMMENTARY_LIMIT = 16 * 1024;

/** A failed enrichment attempt's message (it may quote the replay), in bytes of UTF-8. */
export const FAILURE_MESSAGE_LIMIT = 1024;

/** The most bytes read of an LLM endpoint's answer: a larger answer fails the attempt. */
export const LLM_RESPONSE_LIMIT = 1024 * 1024;

/** How much of a webhook delivery's payload and of the receiver's answer the delivery log keeps and shows, in bytes of UTF-8. */
export const WEBHOOK_LOG_BODY_LIMIT = 4096;

/** A list's page: its size without `?limit=`, and the most one page holds. */
export interface PageSize {
  readonly default: number;
  readonly max: number;
}

/** `GET /api/nodes` pages. */
export const NODE_PAGE = { default: 200, max: 1000 } as const;

/**
 * `GET /api/persons` and `/api/zones` pages. The default is the largest page, so a client written
 * before the lists were paged (one GET, no Link) still reads a whole household at once.
 */
export const LIST_PAGE = { default: 1000, max: 1000 } as const;

/** `GET /api/events` pages, oldest first or newest first. */
export const EVENT_PAGE = { default: 100, max: 1000 } as const;

/** The newest-first lists of records: baselines, matches, webhook deliveries. */
export const RECORD_PAGE = { default: 50, max: 500 } as const;

/** The UTF-8 size of a value's JSON text. */
export const jsonBytes = (value: unknown): number => Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');

/** `text` cut to at most `maxBytes` bytes of UTF-8 on a character boundary, marked with an ellipsis when cut. */
export function truncateUtf8(text: string, maxBytes: number): string {
  if (Buffer.byteLength(text, 'utf8') <= maxBytes) return text;
  const ellipsis = '…';
  const budget = maxBytes - Buffer.byteLength(ellipsis, 'utf8');
  let bytes = 0;
  let end = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char, 'utf8');
    if (bytes + size > budget) break;
    bytes += size;
    end += char.length;
  }
  return text.slice(0, end) + ellipsis;
}
