import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis } from 'rate-limiter-flexible';
import { randomBytes } from 'node:crypto';
import { MemoryStore, RateLimiter, RedisStore } from '../src/ratelimit/index.js';
import { QUICK, compareRates, header, ratio, table } from './lib.js';

const KEYS = 1000;
const COST = 3;
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379/0';

/**
 * allowN checks per second: our memory and Redis stores against rate-limiter-flexible's memory and
 * Redis limiters, with the same policy (capacity 100, 10 tokens/s), cost 3, over 1,000 keys.
 * Redis runs 64 checks in flight at a time, like a busy server would.
 */
export async function benchRateLimit(): Promise<boolean> {
  header('Rate limiter: allowN(key, 3) checks per second');
  const duration = QUICK ? 300 : 3000;
  const policy = { capacity: 100, refillPerSecond: 10 };
  let i = 0;
  const key = () => `k${i++ % KEYS}`;

  const memory = new RateLimiter(new MemoryStore(), policy);
  const flexibleMemory = new RateLimiterMemory({ points: 100, duration: 10 });
  // Synchronous-looking loops in batches of 100 keep promise overhead comparable for both.
  const [oursMemory, theirsMemory] = await compareRates(
    async () => {
      for (let n = 0; n < 100; n++) await memory.allowN(key(), COST);
    },
    async () => {
      for (let n = 0; n < 100; n++) await flexibleMemory.consume(key(), COST).catch(() => {});
    },
    duration * 2,
    100,
  );

  const prefix = `bench:${randomBytes(4).toString('hex')}:`;
  const redis = new Redis(REDIS_URL);
  const redisLimiter = new RateLimiter(new RedisStore(redis, prefix + 'ours:'), policy);
  const flexibleRedis = new RateLimiterRedis({ storeClient: redis, points: 100, duration: 10, keyPrefix: prefix + 'theirs' });
  const inFlight = 64;
  const [oursRedis, theirsRedis] = await compareRates(
    () => Promise.all(Array.from({ length: inFlight }, () => redisLimiter.allowN(key(), COST))),
    () => Promise.all(Array.from({ length: inFlight }, () => flexibleRedis.consume(key(), COST).catch(() => {}))),
    duration * 2,
    inFlight,
  );
  const leftovers = await redis.keys(prefix + '*');
  if (leftovers.length) await redis.del(...leftovers);
  redis.disconnect();

  table([
    { name: 'mothership memory store', value: oursMemory, unit: 'checks/s' },
    { name: 'rate-limiter-flexible memory', value: theirsMemory, unit: 'checks/s' },
    { name: 'mothership Redis store', value: oursRedis, unit: 'checks/s' },
    { name: 'rate-limiter-flexible Redis', value: theirsRedis, unit: 'checks/s' },
  ]);
  const memoryMet = ratio('memory vs rate-limiter-flexible', oursMemory, theirsMemory, 3);
  const redisMet = ratio('Redis vs rate-limiter-flexible', oursRedis, theirsRedis, 1);
  return memoryMet && redisMet;
}
