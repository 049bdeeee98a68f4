import { MICRO, takeTokens, type BucketPolicy, type BucketState, type Decision } from './bucket.js';

export interface RateLimitStore {
  take(key: string, policy: BucketPolicy, n: number): Promise<Decision>;
  close?(): Promise<void>;
}

interface Bucket extends BucketState {
  /** When the bucket will be full again: from then on it needs no state. */
  fullAtMs: number;
}

/** How often the whole map is swept for buckets that are full again (O(keys), amortized to nothing). */
const SWEEP_INTERVAL_MS = 5000;

/**
 * Buckets in process memory with bounded size. A full bucket needs no state, so entries whose bucket
 * has refilled are dropped by a sweep every SWEEP_INTERVAL_MS. Past `maxKeys` the oldest entry is
 * dropped even if not yet full: under a flood of distinct keys that client gets a fresh bucket early,
 * the price of a hard memory bound.
 */
export class MemoryStore implements RateLimitStore {
  private readonly buckets = new Map<string, Bucket>();
  private readonly maxKeys: number;
  private readonly now: () => number;
  private nextSweepAt = 0;

  constructor(options: { maxKeys?: number; now?: () => number } = {}) {
    this.maxKeys = options.maxKeys ?? 100_000;
    this.now = options.now ?? Date.now;
  }

  get size(): number {
    return this.buckets.size;
  }

  async take(key: string, policy: BucketPolicy, n: number): Promise<Decision> {
    return this.takeSync(key, policy, n);
  }

  takeSync(key: string, policy: BucketPolicy, n: number): Decision {
    const nowMs = this.now();
    const bucket = this.buckets.get(key);
    const result = takeTokens(policy, bucket, n, nowMs);
    const full = result.tokens >= policy.capacity * MICRO;
    if (bucket) {
      bucket.tokens = result.tokens;
      bucket.updatedAtMs = nowMs;
      bucket.fullAtMs = nowMs + result.reset_ms;
    } else if (!full) {
      this.buckets.set(key, { tokens: result.tokens, updatedAtMs: nowMs, fullAtMs: nowMs + result.reset_ms });
      if (this.buckets.size > this.maxKeys) this.buckets.delete(this.buckets.keys().next().value!);
    }
    if (nowMs >= this.nextSweepAt) this.sweep(nowMs);
    return result;
  }

  private sweep(nowMs: number): void {
    this.nextSweepAt = nowMs + SWEEP_INTERVAL_MS;
    for (const [key, bucket] of this.buckets) if (bucket.fullAtMs <= nowMs) this.buckets.delete(key);
  }
}
