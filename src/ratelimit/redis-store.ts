import type { Redis } from 'ioredis';
import { MICRO, refillPerMs, type BucketPolicy, type Decision } from './bucket.js';
import type { RateLimitStore } from './memory-store.js';

/**
 * The same arithmetic as bucket.ts, run atomically inside Redis with Redis's own clock, so every
 * instance sharing the server enforces one limit. State is one string "tokens:at" (GET and SET PX: the
 * fewest commands), and a key expires when its bucket would be full again.
 * Returns {allowed, remaining, retry_after_ms (-1 = never), reset_ms}.
 */
const TAKE_SCRIPT = `
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local tokens = capacity
local state = redis.call('GET', KEYS[1])
if state then
  local sep = string.find(state, ':', 1, true)
  local at = tonumber(string.sub(state, sep + 1))
  tokens = tonumber(string.sub(state, 1, sep - 1))
  if now > at then tokens = math.min(capacity, tokens + (now - at) * rate) end
end
local allowed = 0
local retry = 0
if want <= tokens then
  allowed = 1
  tokens = tokens - want
elseif want > capacity then
  retry = -1
else
  retry = math.ceil((want - tokens) / rate)
end
local reset = math.ceil((capacity - tokens) / rate)
if tokens >= capacity then
  if state then redis.call('DEL', KEYS[1]) end
else
  redis.call('SET', KEYS[1], tokens .. ':' .. now, 'PX', reset)
end
return {allowed, math.floor(tokens / ${MICRO}), retry, reset}
`;

export class RedisStore implements RateLimitStore {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {
    redis.defineCommand('mothershipTakeTokens', { numberOfKeys: 1, lua: TAKE_SCRIPT });
  }

  async take(key: string, policy: BucketPolicy, n: number): Promise<Decision> {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`n must be a whole number >= 0, got ${n}`);
    const take = (this.redis as unknown as Record<string, (...args: unknown[]) => Promise<number[]>>).mothershipTakeTokens!;
    const [allowed, remaining, retry, reset] = await take.call(this.redis, this.prefix + key, policy.capacity * MICRO, refillPerMs(policy), n * MICRO);
    return { allowed: allowed === 1, remaining: remaining!, retry_after_ms: retry === -1 ? null : retry!, reset_ms: reset! };
  }
}
