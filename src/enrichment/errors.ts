import { conflict, DomainError, invalid, notFound } from '../errors.js';

/**
 * The enrichment room's refusals, as factories over `DomainError` (src/errors.ts): each names its
 * problem code, which the HTTP edge answers in one place, as every room's.
 */

/** A bot or a match named by an admin route does not exist. */
export const recordNotFound = (kind: 'Bot' | 'Match', id: string) => notFound(kind, id);
/** A bot or a match created with an id already taken. */
export const recordExists = (kind: 'Bot' | 'Match', id: string) => conflict(`${kind} "${id}" already exists`);
/** A replay written to a match breaks the worker's rule (`field`: a JSON Pointer into the body). */
export const replayRefused = (field: string, reason: string) => invalid(field, reason);
/** The match an enrichment request or status names does not exist (or is not the asking bot's). */
export const matchNotFound = (matchId: string) => new DomainError('match_not_found', `Match "${matchId}" does not exist`);
export const matchNotCompleted = (matchId: string, status: string) => new DomainError('match_not_completed', `Match "${matchId}" is ${status}, not completed`);
export const replayUnusable = (matchId: string) =>
  new DomainError('replay_unusable', `Match "${matchId}" has no replay to write commentary from; set one with PATCH /api/matches/${matchId}`);
/** The stored replay breaks the worker's rule (`field`: a JSON Pointer into the match). */
export const replayInvalid = (matchId: string, field: string, reason: string) =>
  new DomainError(
    'replay_invalid',
    `Match "${matchId}" has a replay the worker cannot read (${field}: ${reason}); correct it with PATCH /api/matches/${matchId}`,
    { errors: [{ path: field, message: reason }] },
  );
/** The nonce store cannot be reached, so a replay cannot be ruled out. */
export const nonceStoreUnavailable = () =>
  new DomainError('service_unavailable', 'Replay protection is unavailable; try again shortly', { retryAfterSeconds: 5 });

/**
 * A signed request refused in the request's own write (its nonce seen before, its bot deleted
 * meanwhile): the route answers it as the bot check answers every refusal, one opaque 401, and logs
 * `reason`.
 */
export class BotRefused extends DomainError {
  constructor(readonly reason: string) {
    super('unauthorized', `bot request refused: ${reason}`);
  }
}
