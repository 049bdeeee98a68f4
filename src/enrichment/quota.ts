import { LRUCache } from 'lru-cache';
import { DomainError } from '../errors.js';

/** The daily quota's name in the RateLimit fields and in a 429's `violated-policies`. */
export const QUOTA_POLICY = 'daily';
/** Enrichment jobs a bot may enqueue in the rolling window. */
export const DAILY_QUOTA = 5;
export const QUOTA_WINDOW_MS = 24 * 60 * 60 * 1000;

/** Bots remembered at their quota, at most (least recently refused forgotten first). */
const AT_QUOTA_BOTS = 10_000;

/** The start of the window at `nowMs`: jobs enqueued after it count. */
export const windowStart = (nowMs: number) => new Date(nowMs - QUOTA_WINDOW_MS).toISOString();

/**
 * The end of the window at `nowMs`, a window ahead of now: a job stamped ahead of this clock by an
 * instance whose clock runs ahead still counts, so the quota stays exact across instances however far
 * their clocks differ, up to a day; a job stamped further ahead was enqueued while a clock ran a day or
 * more ahead, since corrected, and would otherwise hold its bot at the quota until then.
 */
export const windowEnd = (nowMs: number) => new Date(nowMs + QUOTA_WINDOW_MS).toISOString();

/** When a job enqueued at `enqueuedAt` stops counting against the quota. */
export const leavesWindowAt = (enqueuedAt: string) => Date.parse(enqueuedAt) + QUOTA_WINDOW_MS;

/** Whole seconds from `nowMs` to `atMs`, at least 1. */
export const secondsUntil = (atMs: number, nowMs: number) => Math.max(1, Math.ceil((atMs - nowMs) / 1000));

/** What the quota says after a request: requests left, and seconds until the oldest counted job leaves the window (0: none counted). */
export function quotaLeft(used: number, oldest: string | null, nowMs: number): { remaining: number; resetSeconds: number } {
  return { remaining: DAILY_QUOTA - used, resetSeconds: used && oldest ? secondsUntil(leavesWindowAt(oldest), nowMs) : 0 };
}

/** The refusal of a bot at its quota until `freeAtMs`, when its oldest counted job leaves the window. */
export const quotaExceeded = (botId: string, freeAtMs: number, nowMs: number) =>
  new DomainError('quota_exceeded', `Bot "${botId}" has used its ${DAILY_QUOTA} enrichment requests of the last 24 hours`, {
    retryAfterSeconds: secondsUntil(freeAtMs, nowMs),
    violatedPolicies: [QUOTA_POLICY],
  });

/**
 * Bots found at their quota, with the time their oldest counted job leaves the window. Until then
 * they stay at quota on every instance (a job's enqueued_at never changes and retention deletes only
 * jobs outside the window), so their requests are refused from memory, with no database read.
 */
export class AtQuota {
  private readonly bots = new LRUCache<string, number>({ max: AT_QUOTA_BOTS });

  /** The refusal for a bot remembered at its quota, or null. */
  refusal(botId: string, nowMs: number): DomainError | null {
    const freeAtMs = this.bots.get(botId);
    return freeAtMs !== undefined && freeAtMs > nowMs ? quotaExceeded(botId, freeAtMs, nowMs) : null;
  }

  remember(botId: string, freeAtMs: number): void {
    this.bots.set(botId, freeAtMs);
  }

  /** Only for jobs changed behind the service's back (tests moving them in time). */
  forget(): void {
    this.bots.clear();
  }
}
