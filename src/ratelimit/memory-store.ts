import { takeTokens, type BucketPolicy, type BucketState, type Decision } from './bucket.js';

export interface RateLimitStore {
  take(key: string, policy: BucketPolicy, n: number): Promise<Decision>;
  close?(): Promise<void>;
}

/**
 * Buckets in process memory with bounded size. A full bucket needs no state, so keys are dropped as
 * soon as they would be full again; the map is kept in least-recently-used order, which puts the
 * likeliest-full keys first, and each check sweeps a few of them. Past `maxKeys` the least recently
 * used key is dropped even if not yet full: under a flood of distinct keys that key's client gets a
 * fresh bucket early, which is the price of a hard memory bound.
 */
export class MemoryStore implements RateLimitStore {
  private readonly buckets = new Map<string, BucketState & { fullAtMs: number }>();

  constructor(
    private readonly options: { maxKeys?: number; now?: () => number } = {},
  ) {}

  get size(): number {
    return this.buckets.size;
  }

  async take(key: string, policy: BucketPolicy, n: number): Promise<Decision> {
    return this.takeSync(key, policy, n);
  }

  takeSync(key: string, policy: BucketPolicy, n: number): Decision {
    const nowMs = (this.options.now ?? Date.now)();
    const current = this.buckets.get(key);
    const { decision, state } = takeTokens(policy, current, n, nowMs);
    this.buckets.delete(key);
    if (state) this.buckets.set(key, { ...state, fullAtMs: nowMs + decision.reset_ms });
    this.sweep(nowMs);
    return decision;
  }

  private sweep(nowMs: number): void {
    let checked = 0;
    for (const [key, bucket] of this.buckets) {
      if (checked++ >= 4 || bucket.fullAtMs > nowMs) break;
      this.buckets.delete(key);
    }
    const maxKeys = this.options.maxKeys ?? 100_000;
    while (this.buckets.size > maxKeys) this.buckets.delete(this.buckets.keys().next().value!);
  }
}
