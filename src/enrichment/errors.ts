/**
 * The enrichment room's errors, in one table (after Fastify's lib/errors.js): each code with what it
 * carries and its message. They say what went wrong in the room's terms; the HTTP edge
 * (routes.ts, `problemOf`) decides the status and problem code each one answers.
 */
const ENRICHMENT_ERRORS = {
  /** A bot or a match named by an admin route does not exist. */
  record_not_found: (d: { kind: 'Bot' | 'Match'; id: string }) => `${d.kind} "${d.id}" does not exist`,
  /** A bot or a match created with an id already taken. */
  record_exists: (d: { kind: 'Bot' | 'Match'; id: string }) => `${d.kind} "${d.id}" already exists`,
  /** A replay written to a match breaks the worker's rule (`field`: a JSON Pointer into the body). */
  replay_refused: (d: { field: string; reason: string }) => `${d.field}: ${d.reason}`,
  /** The match an enrichment request or status names does not exist (or is not the asking bot's). */
  match_not_found: (d: { matchId: string }) => `Match "${d.matchId}" does not exist`,
  match_not_completed: (d: { matchId: string; status: string }) => `Match "${d.matchId}" is ${d.status}, not completed`,
  replay_unusable: (d: { matchId: string }) => `Match "${d.matchId}" has no replay to write commentary from; set one with PATCH /api/matches/${d.matchId}`,
  /** The stored replay breaks the worker's rule (`field`: a JSON Pointer into the match). */
  replay_invalid: (d: { matchId: string; field: string; reason: string }) =>
    `Match "${d.matchId}" has a replay the worker cannot read (${d.field}: ${d.reason}); correct it with PATCH /api/matches/${d.matchId}`,
  /** The bot's daily quota is used until `retryAfterSeconds` from now. */
  quota_exceeded: (d: { botId: string; quota: number; retryAfterSeconds: number }) =>
    `Bot "${d.botId}" has used its ${d.quota} enrichment requests of the last 24 hours`,
  /** A signed request refused: the caller learns nothing more, `reason` is for the log. */
  bot_refused: (d: { reason: string }) => `bot request refused: ${d.reason}`,
  /** The nonce store cannot be reached, so a replay cannot be ruled out. */
  nonce_store_unavailable: () => 'Replay protection is unavailable; try again shortly',
} as const;

export type EnrichmentErrorCode = keyof typeof ENRICHMENT_ERRORS;
export type EnrichmentErrorDetails<C extends EnrichmentErrorCode> = Parameters<(typeof ENRICHMENT_ERRORS)[C]>[0];

export class EnrichmentError<C extends EnrichmentErrorCode = EnrichmentErrorCode> extends Error {
  readonly details: EnrichmentErrorDetails<C>;

  constructor(
    readonly code: C,
    ...details: EnrichmentErrorDetails<C> extends undefined ? [] : [EnrichmentErrorDetails<C>]
  ) {
    const detail = details[0] as EnrichmentErrorDetails<C>;
    // A refusal is an answer, not a fault to trace: capturing a stack would cost a tenth of a refused request.
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super((ENRICHMENT_ERRORS[code] as (d: EnrichmentErrorDetails<C>) => string)(detail));
    Error.stackTraceLimit = stackTraceLimit;
    this.details = detail;
  }

  /** Narrows to one code, with its details typed. */
  is<K extends EnrichmentErrorCode>(code: K): this is EnrichmentError<K> {
    return (this.code as EnrichmentErrorCode) === code;
  }
}
