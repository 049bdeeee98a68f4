import type { Redis } from 'ioredis';
import { MICRO, refillPerMs, takeTokens, type BucketPolicy, type Decision } from './bucket.js';
import type { RateLimitStore } from './memory-store.js';

/**
 * The bucket kept in Redis, with Redis's own clock, so every instance sharing the server enforces one
 * limit. The key's time to live is the bucket's deficit: it expires exactly when the bucket is full
 * again, so PTTL is the clock and a full bucket stores nothing. The deficit rarely fills whole
 * milliseconds, so the key's value holds what the last millisecond overcounts (< one ms of refill):
 * deficit = PTTL x rate - value, exact in integer micro-tokens. A denied check changes nothing and
 * writes nothing (on a busy key most checks are denials).
 * Returns the micro-tokens available before the take; bucket.ts turns that into the decision.
 */
const TAKE_SCRIPT = `
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local tokens = capacity
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then
  local overcount = tonumber(redis.call('GET', KEYS[1]))
  if overcount then tokens = capacity - (ttl * rate - overcount) end
end
if want > tokens then return tokens end
local deficit = capacity - tokens + want
if deficit > 0 then
  local ms = math.ceil(deficit / rate)
  redis.call('SET', KEYS[1], ms * rate - deficit, 'PX', ms)
end
return tokens
`;

/**
 * How long a take may wait for Redis: a server that holds the connection but answers nothing (hung,
 * or behind a network that drops packets) would otherwise hold every limited request, and the
 * requests would pile up in memory. Past it the take fails, as when Redis is away
 * (RATE_LIMIT_REDIS_FAILURE). A take answers in well under a millisecond on a working server.
 */
export const REDIS_COMMAND_TIMEOUT_MS = 1000;

export class RedisStore implements RateLimitStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {
    redis.defineCommand('mothershipTakeTokens', { numberOfKeys: 1, lua: TAKE_SCRIPT });
  }

  async take(key: string, policy: BucketPolicy, n: number): Promise<Decision> {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`n must be a whole number >= 0, got ${n}`);
    const take = (this.redis as unknown as Record<string, (...args: unknown[]) => Promise<number>>).mothershipTakeTokens!;
    // The policy is part of the key: the state is a deficit in the rate it was written with, which a
    // changed RATE_LIMIT_* (or an instance configured otherwise) would misread.
    const bucket = `${this.prefix}${policy.capacity}/${refillPerMs(policy)}:${key}`;
    const available = await take.call(this.redis, bucket, policy.capacity * MICRO, refillPerMs(policy), n * MICRO);
    // The memory store's arithmetic, on the bucket as Redis saw it (it took the tokens if this allows).
    const { tokens: _left, ...decision } = takeTokens(policy, { tokens: available, updatedAtMs: 0 }, n, 0);
    return decision;
  }
}
