/**
 * Token-bucket arithmetic, after Go's golang.org/x/time/rate AllowN: tokens refill lazily at a fixed
 * rate up to the capacity; a check takes `n` tokens or none at all.
 *
 * Tokens are counted in integer micro-tokens and time in integer milliseconds, and the refill rate is
 * kept to 0.001 token/s steps, so `elapsed * rate` is an exact integer: no drift however long it runs.
 */
import { MAX_CAPACITY } from '../limits.js';

export const MICRO = 1_000_000;

export interface BucketPolicy {
  /** Largest burst, in tokens. */
  capacity: number;
  /** Tokens added per second (a multiple of 0.001). */
  refillPerSecond: number;
}

export interface BucketState {
  /** Micro-tokens in the bucket at `updatedAtMs`. */
  tokens: number;
  updatedAtMs: number;
}

export interface Decision {
  allowed: boolean;
  /** Whole tokens left after this check. */
  remaining: number;
  /** When denied: ms until `n` tokens are available; null when `n` exceeds the capacity (never possible). */
  retry_after_ms: number | null;
  /** ms until the bucket is full again (the memory store forgets a full bucket). */
  reset_ms: number;
  /** ms until another check of the same `n` could pass (0: it could now); null when never. */
  next_ms: number | null;
}

export class PolicyError extends Error {}

/** Micro-tokens per millisecond; an integer by construction. */
export function refillPerMs(policy: BucketPolicy): number {
  return Math.round(policy.refillPerSecond * 1000);
}

export function validatePolicy(policy: BucketPolicy): void {
  if (!Number.isInteger(policy.capacity) || policy.capacity < 1) throw new PolicyError(`capacity must be a whole number >= 1, got ${policy.capacity}`);
  if (!(policy.refillPerSecond > 0) || refillPerMs(policy) < 1) {
    throw new PolicyError(`refillPerSecond must be at least 0.001, got ${policy.refillPerSecond}`);
  }
  // Redis's Lua prints numbers with 14 significant digits: micro-token counts must stay below 1e14.
  if (policy.capacity > MAX_CAPACITY) throw new PolicyError(`capacity must be at most ${MAX_CAPACITY}, got ${policy.capacity}`);
}

/** A decision plus the micro-tokens left in the bucket (what a store keeps). */
export interface Take extends Decision {
  tokens: number;
}

/**
 * Takes `n` tokens if available from a bucket that held `tokens` micro-tokens at `updatedAtMs`
 * (a key never seen is a full bucket: pass `undefined`). A clock that went backwards refills nothing.
 * When the returned `tokens` equals the capacity the bucket is full and needs no stored state.
 */
export function takeTokens(policy: BucketPolicy, state: BucketState | undefined, n: number, nowMs: number): Take {
  if (!Number.isInteger(n) || n < 0) throw new RangeError(`n must be a whole number >= 0, got ${n}`);
  const capacity = policy.capacity * MICRO;
  const rate = refillPerMs(policy);
  let tokens = state === undefined ? capacity : Math.min(capacity, state.tokens + Math.max(0, nowMs - state.updatedAtMs) * rate);
  const want = n * MICRO;
  const allowed = want <= tokens;
  if (allowed) tokens -= want;
  return {
    allowed,
    remaining: Math.floor(tokens / MICRO),
    retry_after_ms: allowed ? 0 : want > capacity ? null : Math.ceil((want - tokens) / rate),
    reset_ms: Math.ceil((capacity - tokens) / rate),
    next_ms: want <= tokens ? 0 : want > capacity ? null : Math.ceil((want - tokens) / rate),
    tokens,
  };
}
