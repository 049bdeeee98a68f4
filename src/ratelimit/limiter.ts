import { validatePolicy, type BucketPolicy, type Decision } from './bucket.js';
import type { RateLimitStore } from './memory-store.js';

/** The limiter: one token-bucket policy over a store (memory or Redis), with Allow and AllowN checks. */
export class RateLimiter {
  constructor(
    private readonly store: RateLimitStore,
    readonly policy: BucketPolicy,
  ) {
    validatePolicy(policy);
  }

  allow(key: string): Promise<Decision> {
    return this.allowN(key, 1);
  }

  allowN(key: string, n: number): Promise<Decision> {
    return this.store.take(key, this.policy, n);
  }
}
