import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { parseList } from 'structured-headers';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import type { InjectOptions } from 'fastify';
import { ConfigError } from '../src/config.js';
import { MICRO, PolicyError, takeTokens, validatePolicy, type BucketState } from '../src/ratelimit/bucket.js';
import { addressKey, perPage } from '../src/http/index.js';
import { DETECTION_WEIGHT } from '../src/baselines/routes.js';
import { MemoryStore, RateLimiter, RedisStore, TOKEN_POLICY, type RateLimitStore } from '../src/ratelimit/index.js';
import { REDIS_URL, startTestApp, type TestApp } from './helpers/app.js';
import { REPLAY } from './helpers/fixtures.js';
import { botRequest } from './helpers/bot.js';

const policy = { capacity: 10, refillPerSecond: 2 };

describe('token bucket arithmetic', () => {
  const t0 = 1_000_000;

  it('starts full, takes n tokens, and refills lazily up to the capacity', () => {
    let result = takeTokens(policy, undefined, 10, t0);
    assert.deepEqual(result, { allowed: true, remaining: 0, retry_after_ms: 0, reset_ms: 5000, next_ms: 5000, tokens: 0 });
    assert.equal(takeTokens(policy, undefined, 3, t0).next_ms, 0, 'another 3 fit at once');
    const state: BucketState = { tokens: result.tokens, updatedAtMs: t0 };
    result = takeTokens(policy, state, 1, t0);
    assert.equal(result.allowed, false);
    assert.equal(result.retry_after_ms, 500, '1 token at 2/s takes 500 ms');
    result = takeTokens(policy, state, 1, t0 + 500);
    assert.equal(result.allowed, true);
    result = takeTokens(policy, state, 1, t0 + 3_600_000);
    assert.equal(result.remaining, 9, 'an hour idle refills to the capacity, never above');
  });

  it('a rejected check consumes nothing', () => {
    const state = { tokens: takeTokens(policy, undefined, 7, t0).tokens, updatedAtMs: t0 };
    const rejected = takeTokens(policy, state, 5, t0);
    assert.equal(rejected.allowed, false);
    assert.equal(rejected.remaining, 3);
    assert.equal(rejected.retry_after_ms, 1000);
    assert.equal(takeTokens(policy, state, 3, t0).allowed, true);
  });

  it('n above the capacity is never allowed and has no retry time; n = 0 is always allowed', () => {
    const over = takeTokens(policy, undefined, 11, t0);
    assert.equal(over.allowed, false);
    assert.equal(over.retry_after_ms, null);
    const empty = { tokens: takeTokens(policy, undefined, 10, t0).tokens, updatedAtMs: t0 };
    const zero = takeTokens(policy, empty, 0, t0);
    assert.equal(zero.allowed, true);
    assert.equal(zero.remaining, 0);
    assert.throws(() => takeTokens(policy, undefined, -1, t0), RangeError);
    assert.throws(() => takeTokens(policy, undefined, 1.5, t0), RangeError);
  });

  it('handles fractional refill rates exactly, without drift over many steps', () => {
    const slow = { capacity: 5, refillPerSecond: 0.3 };
    let state = { tokens: takeTokens(slow, undefined, 5, t0).tokens, updatedAtMs: t0 };
    // 3 tokens take exactly 10 s at 0.3/s; split into 1,000 checks of 10 ms each.
    for (let step = 1; step <= 1000; step++) state = { tokens: takeTokens(slow, state, 0, t0 + step * 10).tokens, updatedAtMs: t0 + step * 10 };
    assert.equal(state.tokens, 3 * MICRO);
    assert.equal(takeTokens(slow, state, 3, t0 + 10_000).allowed, true);
    assert.equal(takeTokens(slow, state, 4, t0 + 10_000).allowed, false);
  });

  it('a clock that goes backwards refills nothing', () => {
    const state = { tokens: takeTokens(policy, undefined, 10, t0).tokens, updatedAtMs: t0 };
    const back = takeTokens(policy, state, 1, t0 - 60_000);
    assert.equal(back.allowed, false);
    assert.equal(back.tokens, 0);
  });

  it('reports a full bucket once refilled (nothing to store)', () => {
    const state = { tokens: takeTokens(policy, undefined, 1, t0).tokens, updatedAtMs: t0 };
    assert.equal(takeTokens(policy, state, 0, t0 + 499).tokens < policy.capacity * MICRO, true);
    assert.equal(takeTokens(policy, state, 0, t0 + 500).tokens, policy.capacity * MICRO);
  });

  it('refuses impossible policies', () => {
    assert.throws(() => validatePolicy({ capacity: 0, refillPerSecond: 1 }), PolicyError);
    assert.throws(() => validatePolicy({ capacity: 1, refillPerSecond: 0.0001 }), PolicyError);
    assert.throws(() => validatePolicy({ capacity: 1.5, refillPerSecond: 1 }), PolicyError);
  });
});

function storeSuite(name: string, makeStore: () => Promise<{ store: RateLimitStore; close: () => Promise<void> }>) {
  describe(`limiter with the ${name} store`, () => {
    let store: RateLimitStore;
    let close: () => Promise<void>;
    before(async () => ({ store, close } = await makeStore()));
    after(() => close());

    it('allows a burst up to the capacity, then refuses with a retry time', async () => {
      const limiter = new RateLimiter(store, { capacity: 5, refillPerSecond: 1 });
      const key = `burst-${randomBytes(4).toString('hex')}`;
      for (let i = 4; i >= 0; i--) assert.deepEqual((await limiter.allow(key)).remaining, i);
      const refused = await limiter.allow(key);
      assert.equal(refused.allowed, false);
      assert.ok(refused.retry_after_ms! > 0 && refused.retry_after_ms! <= 1000, String(refused.retry_after_ms));
    });

    it('allowN takes several tokens at once or none', async () => {
      const limiter = new RateLimiter(store, { capacity: 10, refillPerSecond: 0.001 });
      const key = `n-${randomBytes(4).toString('hex')}`;
      assert.equal((await limiter.allowN(key, 7)).allowed, true);
      const refused = await limiter.allowN(key, 4);
      assert.equal(refused.allowed, false);
      assert.equal(refused.remaining, 3);
      assert.equal((await limiter.allowN(key, 3)).allowed, true);
      const over = await limiter.allowN(`${key}-x`, 11);
      assert.equal(over.allowed, false);
      assert.equal(over.retry_after_ms, null);
    });

    it('refills over time', async () => {
      const limiter = new RateLimiter(store, { capacity: 2, refillPerSecond: 20 });
      const key = `refill-${randomBytes(4).toString('hex')}`;
      await limiter.allowN(key, 2);
      assert.equal((await limiter.allow(key)).allowed, false);
      await new Promise((resolve) => setTimeout(resolve, 120));
      assert.equal((await limiter.allow(key)).allowed, true);
    });

    it('never over-grants under 200 parallel checks on one key', async () => {
      const limiter = new RateLimiter(store, { capacity: 50, refillPerSecond: 0.001 });
      const key = `race-${randomBytes(4).toString('hex')}`;
      const results = await Promise.all(Array.from({ length: 200 }, () => limiter.allowN(key, 2)));
      assert.equal(results.filter((result) => result.allowed).length, 25);
    });
  });
}

storeSuite('memory', async () => ({ store: new MemoryStore(), close: async () => {} }));
storeSuite('Redis', async () => {
  const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
  return { store: new RedisStore(redis, `mothership-test:${randomBytes(6).toString('hex')}:`), close: async () => void redis.disconnect() };
});

describe('Redis limiter shared by two clients', () => {
  it('enforces one limit across instances', async () => {
    const prefix = `mothership-test:${randomBytes(6).toString('hex')}:`;
    const a = new Redis(REDIS_URL);
    const b = new Redis(REDIS_URL);
    try {
      const limiterA = new RateLimiter(new RedisStore(a, prefix), { capacity: 30, refillPerSecond: 0.001 });
      const limiterB = new RateLimiter(new RedisStore(b, prefix), { capacity: 30, refillPerSecond: 0.001 });
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) => (i % 2 ? limiterA : limiterB).allow('shared')));
      assert.equal(results.filter((result) => result.allowed).length, 30);
      const ttl = await a.pttl(`${prefix}30/1:shared`);
      assert.ok(ttl > 0, 'the key expires when the bucket would be full again');
    } finally {
      a.disconnect();
      b.disconnect();
    }
  });

  it('keeps the deficit exact when it is not a whole number of milliseconds, and writes nothing on a denial', async () => {
    const prefix = `mothership-test:${randomBytes(6).toString('hex')}:`;
    const redis = new Redis(REDIS_URL);
    try {
      // 0.3 token/s = 300 micro-tokens per ms: one token is 3,333.3 ms of refill.
      const limiter = new RateLimiter(new RedisStore(redis, prefix), { capacity: 3, refillPerSecond: 0.3 });
      const started = Date.now();
      for (let i = 0; i < 3; i++) assert.equal((await limiter.allow('exact')).allowed, true);
      const key = `${prefix}3/300:exact`;
      const deficit = async () => (await redis.pttl(key)) * 300 - Number(await redis.get(key));
      const afterTakes = await deficit();
      const elapsed = Date.now() - started + 1;
      // Three whole tokens, less at most the refill of the milliseconds that passed: nothing lost to rounding.
      assert.ok(afterTakes <= 3_000_000 && afterTakes >= 3_000_000 - elapsed * 300, String(afterTakes));
      const refused = await limiter.allow('exact');
      assert.equal(refused.allowed, false);
      assert.ok(refused.retry_after_ms! > 3_300 && refused.retry_after_ms! <= 3_334, String(refused.retry_after_ms));
      assert.ok((await deficit()) <= afterTakes, 'a denial leaves the bucket as it was');
    } finally {
      redis.disconnect();
    }
  });
});

describe('Redis buckets of another policy', () => {
  it('are not misread: a changed refill rate starts the bucket full, never at a negative remaining (outside review)', async () => {
    const prefix = `mothership-test:${randomBytes(6).toString('hex')}:`;
    const redis = new Redis(REDIS_URL);
    try {
      const slow = new RateLimiter(new RedisStore(redis, prefix), { capacity: 60, refillPerSecond: 0.05 });
      for (let i = 0; i < 61; i++) await slow.allow('client');
      assert.equal((await slow.allow('client')).allowed, false, 'drained under the slow policy');
      // The same client under the default policy (an operator raised the rate, or an instance configured otherwise).
      const usual = new RateLimiter(new RedisStore(redis, prefix), { capacity: 60, refillPerSecond: 1 });
      const decision = await usual.allow('client');
      assert.deepEqual([decision.allowed, decision.remaining], [true, 59]);
    } finally {
      redis.disconnect();
    }
  });
});

describe('memory store stays bounded', () => {
  it('drops full buckets and caps the number of keys under a flood of distinct keys', async () => {
    let clock = 0;
    const store = new MemoryStore({ maxKeys: 1000, now: () => clock });
    const limiter = new RateLimiter(store, { capacity: 5, refillPerSecond: 1 });
    for (let i = 0; i < 50_000; i++) {
      await limiter.allow(`flood-${i}`);
      clock += 1;
    }
    assert.ok(store.size <= 1000, `size ${store.size}`);
    clock += 10_000;
    for (let i = 0; i < 300; i++) await limiter.allow(`late-${i}`);
    assert.ok(store.size <= 1000);
    assert.ok(store.size <= 300, `idle full buckets are swept as new keys arrive (size ${store.size})`);
  });
});

describe('rate limiting over HTTP', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '20', RATE_LIMIT_REFILL_PER_SEC: '0.01' });
  });
  after(() => app.cleanup());

  // Requests without credentials: a valid token has its own, larger bucket (below).
  const anonymous = { authorization: '' };

  it('sends RateLimit headers and a 429 problem with Retry-After once the bucket is empty', async () => {
    const first = await app.api('GET', '/api/system/health', undefined, anonymous);
    assert.equal(first.status, 401);
    assert.equal(first.headers['ratelimit-policy'], '"default";q=20;w=2000');
    // draft-ietf-httpapi-ratelimit-headers-10: t is the time until more quota is available, 0 while r > 0.
    assert.equal(first.headers['ratelimit'], '"default";r=19;t=0');
    for (let i = 0; i < 19; i++) assert.equal((await app.api('GET', '/api/system/health', undefined, anonymous)).status, 401);
    const limited = await app.api('GET', '/api/system/health', undefined, anonymous);
    assert.equal(limited.status, 429);
    assert.equal(limited.body.code, 'rate_limited');
    assert.deepEqual(limited.body['violated-policies'], ['default'], "the draft's problem member names the policy of RateLimit-Policy");
    assert.equal(limited.headers['retry-after'], '100');
    assert.equal(limited.headers['ratelimit'], '"default";r=0;t=100', 't and Retry-After agree');
    assert.equal(limited.headers['content-type'], 'application/problem+json; charset=utf-8');
    assert.equal((await app.api('GET', '/healthz')).status, 200, 'liveness is never limited');
  });

  it("a bot's request refused by its bucket records nothing, not even its nonce", async () => {
    // An app of its own: the other tests empty this one's buckets for the test client's address.
    const app = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '20', RATE_LIMIT_REFILL_PER_SEC: '0.01' });
    const answers = [];
    try {
      const bot = await app.enrichment.bots.create({ id: 'eager', name: 'Eager' });
      await app.enrichment.matches.create({ id: 'once', status: 'completed', replay: REPLAY });
      for (let i = 0; i < 24; i++) {
        const nonce = `eager-nonce-${String(i).padStart(8, '0')}`;
        const response = await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'once' }, { nonce });
        const stored = await app.database.db.selectFrom('nonces').select('key').where('key', '=', `eager:${nonce}`).executeTakeFirst();
        answers.push(`${response.status}:${stored ? 'stored' : 'none'}`);
      }
    } finally {
      await app.cleanup();
    }
    // Accepted (the first, then idempotent repeats): recorded. Refused by the bucket: nothing written.
    assert.ok(answers.includes('202:stored'), answers.join(' '));
    assert.ok(answers.includes('429:none'), answers.join(' '));
    assert.deepEqual(
      answers.filter((answer) => answer !== '202:stored' && answer !== '429:none'),
      [],
    );
  });

  it("charges a bot's signed status read to the bot's bucket only, and a bad signature once to the address (outside review)", async () => {
    // An app of its own, with a fresh address bucket: 20 tokens, next to nothing refilled.
    const app = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '20', RATE_LIMIT_REFILL_PER_SEC: '0.01' });
    try {
      const bots = await Promise.all(Array.from({ length: 8 }, (_, index) => app.enrichment.bots.create({ id: `reader-${index}`, name: `Reader ${index}` })));
      // Eight bots behind one address, four reads each: more than the address bucket holds.
      for (const bot of bots)
        for (let read = 0; read < 4; read++) {
          const status = await botRequest(app.http, bot, 'GET', '/api/matches/none/enrichment');
          assert.equal(status.status, 404, `${bot.id}: ${JSON.stringify(status.body)}`);
        }
      const address = async () => (await app.api('GET', '/api/system/health', undefined, anonymous)).headers['ratelimit'];
      assert.equal(await address(), '"default";r=19;t=0', 'the signed reads left the address bucket alone');
      const forged = await botRequest(app.http, bots[0]!, 'GET', '/api/matches/none/enrichment', undefined, { secrets: ['not-the-secret'] });
      assert.equal(forged.status, 401);
      assert.equal(forged.headers['ratelimit'], '"default";r=18;t=0', 'a bad signature costs the address one request, not two');
    } finally {
      await app.cleanup();
    }
  });

  it('charges a request to a bot route refused before its signature is checked to its address, as the check would (outside review)', async () => {
    const app = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '20', RATE_LIMIT_REFILL_PER_SEC: '0.01' });
    try {
      const bot = await app.enrichment.bots.create({ id: 'sloppy', name: 'Sloppy' });
      // Refused while the body or the query is read, before the signature (which signs the body) is checked.
      const send = async (options: InjectOptions) => {
        const response = await app.http.inject(options);
        return { status: response.statusCode, headers: response.headers, body: response.json() };
      };
      const json = { 'content-type': 'application/json' };
      const early = [
        () => send({ method: 'POST', url: '/api/request-enrichment', headers: json, payload: '{' }),
        () => send({ method: 'POST', url: '/api/request-enrichment', headers: { 'content-type': 'text/plain' }, payload: 'hello' }),
        () => send({ method: 'POST', url: '/api/request-enrichment', headers: json, payload: `"${'x'.repeat(5000)}"` }),
        () => send({ method: 'GET', url: '/api/matches/none/enrichment?page=%ff' }),
        () => botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'none' }, { tamper: { body: '{"match_id":' } }),
      ];
      const answers: string[] = [];
      for (let i = 0; i < 20; i++) {
        const response = await early[i % early.length]!();
        answers.push(`${response.status} ${response.headers['ratelimit']}`);
      }
      assert.deepEqual(
        answers.map((answer) => answer.split(' ')[1]),
        Array.from({ length: 20 }, (_, index) => `"default";r=${19 - index};t=${index < 19 ? 0 : 100}`),
        answers.join(', '),
      );
      assert.deepEqual([...new Set(answers.map((answer) => answer.split(' ')[0]))].sort(), ['400', '413', '415']);
      const refused = await early[0]!();
      assert.equal(refused.status, 429, 'the address bucket is empty');
      assert.equal(refused.body.code, 'rate_limited');
      const signed = await botRequest(app.http, bot, 'GET', '/api/matches/none/enrichment');
      assert.equal(signed.status, 404, "a signed request is charged to the bot's bucket, which is full");
    } finally {
      await app.cleanup();
    }
  });

  it('charges a valid token to its own bucket (1000, 100 a second), not the address', async () => {
    const first = await app.api('GET', '/api/system/health');
    assert.equal(first.status, 200, "the address bucket is empty, the admin token's is not");
    assert.equal(first.headers['ratelimit-policy'], '"default";q=1000;w=10');
    assert.equal(first.headers['ratelimit'], '"default";r=999;t=0');
    const token = (await app.api('POST', '/api/tokens', { name: 'Limited', scope: 'read' })).body.token as string;
    assert.equal(
      (await app.api('GET', '/api/system/health', undefined, { authorization: `Bearer ${token}` })).headers['ratelimit'],
      '"default";r=999;t=0',
      'each token has its own bucket',
    );
  });

  it("charges a user's sessions to one bucket: signing in again gives no fresh one (outside review)", async () => {
    // A request costs 1,000 of 10,000,000 tokens refilled at 100 a second: the tablet's request finds
    // the phone's deficit unless 10 s pass between them, however busy the machine.
    const own = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '10000000', RATE_LIMIT_REFILL_PER_SEC: '100', RATE_LIMIT_COSTS: 'default=1000' });
    try {
      const password = 'household-password';
      assert.equal((await own.api('POST', '/api/users', { username: 'lee', role: 'household', password })).status, 201);
      const remaining: string[] = [];
      for (let device = 0; device < 2; device++) {
        const signedIn = await own.api('POST', '/api/session', { username: 'lee', password }, { authorization: '' });
        assert.equal(signedIn.status, 204);
        const session = { authorization: '', cookie: String(signedIn.headers['set-cookie']).split(';')[0]!, 'sec-fetch-site': 'same-origin' };
        remaining.push(String((await own.api('GET', '/api/system/health', undefined, session)).headers['ratelimit']));
      }
      assert.deepEqual(remaining, ['"default";r=9999;t=0', '"default";r=9998;t=0'], "the tablet's session draws on the phone's bucket");
    } finally {
      await own.cleanup();
    }
  });

  it('headers an independent structured-field parser (RFC 9651) reads as the draft defines them', async () => {
    const response = await app.api('GET', '/api/zones', undefined, {});
    const members = (field: unknown) => parseList(String(field)).map(([value, params]) => [value, Object.fromEntries(params)]);
    const [[policyName, policy]] = members(response.headers['ratelimit-policy']) as [[string, Record<string, unknown>]];
    const [[limitName, limit]] = members(response.headers['ratelimit']) as [[string, Record<string, unknown>]];
    assert.equal(policyName, 'default');
    assert.equal(limitName, 'default');
    for (const value of [policy.q, policy.w, limit.r, limit.t])
      assert.ok(Number.isInteger(value) && (value as number) >= 0, `non-negative integers: ${JSON.stringify([policy, limit])}`);
  });

  it('counts q and r in requests of the route cost', async () => {
    // The settings test costs 10 tokens: 2 fit in a bucket of 20.
    const tested = await app.api(
      'POST',
      '/api/settings/integration/test',
      { target: 'webhook', webhook: { url: 'http://127.0.0.1:1/' } },
      { ...anonymous, 'x-forwarded-for': '198.51.100.7' },
    );
    assert.match(String(tested.headers['ratelimit-policy']), /^"integration_test";q=2;w=2000$/);
    assert.match(String(tested.headers['ratelimit']), /^"integration_test";r=1;t=0$/);
  });

  it("charges a page by the items it asks for, and a page of baselines with verdicts by their work, so that no token's pages hold a core", async () => {
    const reader = { authorization: `Bearer ${(await app.api('POST', '/api/tokens', { name: 'Wall display', scope: 'read' })).body.token}` };
    const policyOf = async (url: string) => {
      const response = await app.api('GET', url, undefined, reader);
      assert.equal(response.status, 200, url);
      return String(response.headers['ratelimit-policy']);
    };
    assert.equal(await policyOf('/api/baselines'), `"default";q=${TOKEN_POLICY.capacity};w=10`, 'a default page of 50 costs one token');
    assert.equal(await policyOf('/api/baselines?limit=500'), `"default";q=${TOKEN_POLICY.capacity / 5};w=10`);
    assert.equal(await policyOf('/api/events?limit=1000'), `"default";q=${TOKEN_POLICY.capacity / 10};w=10`);
    const withVerdicts = Math.floor(TOKEN_POLICY.capacity / (5 * DETECTION_WEIGHT));
    assert.equal(await policyOf('/api/baselines?limit=500&detection=true'), `"default";q=${withVerdicts};w=10`);
    // One run's verdict reads as much history as a page's (outside review: 30 ms for one request, at one token).
    const verdict = await app.api('GET', '/api/baselines/1/detection', undefined, reader);
    assert.equal(verdict.headers['ratelimit-policy'], `"default";q=${TOKEN_POLICY.capacity / DETECTION_WEIGHT};w=10`);
    // A burst of them: the bucket runs dry after about q, whatever it refills meanwhile.
    const burst = await Promise.all(
      Array.from({ length: 3 * withVerdicts }, () => app.api('GET', '/api/baselines?limit=500&detection=true', undefined, reader)),
    );
    const answered = burst.filter((response) => response.status === 200).length;
    assert.ok(answered <= withVerdicts + 2, `${answered} pages with verdicts answered at once, the bucket holds ${withVerdicts}`);
    assert.ok(
      burst.some((response) => response.status === 429),
      burst.map((response) => response.status).join(' '),
    );
  });

  it('charges a request without credentials one page, whatever it asks for: it is refused before any is read (outside review)', async () => {
    const own = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '60', RATE_LIMIT_REFILL_PER_SEC: '0.01' });
    try {
      const refused = await own.api('GET', '/api/baselines?limit=500&detection=true', undefined, anonymous);
      assert.equal(refused.status, 401);
      assert.equal(refused.headers['ratelimit-policy'], '"default";q=60;w=6000');
      assert.equal(refused.headers['ratelimit'], '"default";r=59;t=0', 'not the whole bucket of everyone behind the address');
    } finally {
      await own.cleanup();
    }
  });

  it('reads the size of a page from its query as sent, within its schema', () => {
    const events = perPage({ default: 100, max: 1000 });
    assert.equal(events({}), 1, 'the default page');
    assert.equal(events({ limit: '101' }), 2);
    assert.equal(events({ limit: '5e5' }), 10, 'never more than the maximum');
    assert.equal(events({ limit: 'many' }), 1, 'what validation refuses costs the default');
    assert.equal(events({ limit: ['1000', '1000'] }), 1);
    const weighted = perPage({ default: 50, max: 500 }, (query) => (query.detection === 'true' ? 20 : 1));
    assert.equal(weighted({ limit: '500', detection: 'true' }), 100);
    assert.equal(weighted({ limit: '500', detection: 'false' }), 5);
  });

  it('keys an IPv6 client by its /64 and an IPv4-mapped one by its IPv4 address', () => {
    assert.equal(addressKey('203.0.113.9'), 'ip:203.0.113.9');
    assert.equal(addressKey('::ffff:203.0.113.9'), 'ip:203.0.113.9');
    for (const address of ['2001:db8:a:b::1', '2001:0db8:000a:000b:ffff:ffff:ffff:ffff', '2001:db8:a:b:1:2:3.4.5.6', '2001:DB8:A:B::%eth0']) {
      assert.equal(addressKey(address), 'ip6:2001:db8:a:b::/64', address);
    }
    assert.equal(addressKey('::1'), 'ip6:0:0:0:0::/64');
    assert.equal(addressKey('fe80::1'), 'ip6:fe80:0:0:0::/64');
    assert.equal(addressKey('fe80::1%eth0.1'), 'ip6:fe80:0:0:0::/64', 'a zone id of any spelling Node accepts');
    // IPv4-compatible (deprecated), not mapped: an IPv6 address however it is spelled, never the IPv4 client's bucket.
    for (const address of ['::1.2.3.4', '0::1.2.3.4', '::102:304']) assert.equal(addressKey(address), 'ip6:0:0:0:0::/64', address);
    // An embedded IPv4 tail is two groups, inside the /64 only when `::` stands before it.
    assert.equal(addressKey('64:ff9b::192.0.2.1'), 'ip6:64:ff9b:0:0::/64');
    assert.equal(addressKey('1:2:3:4:5:6:1.2.3.4'), 'ip6:1:2:3:4::/64');
    assert.equal(addressKey('1:2::3:4:5:6'), 'ip6:1:2:0:0::/64');
    assert.equal(addressKey('1:2:3::'), 'ip6:1:2:3:0::/64');
    assert.notEqual(addressKey('2001:db8:a:c::1'), addressKey('2001:db8:a:b::1'));
  });

  it('keys an address a proxy wrote with a port, brackets or in hex as the address, and anything else as one client (outside review)', () => {
    assert.equal(addressKey('203.0.113.9:40001'), 'ip:203.0.113.9');
    assert.equal(addressKey('::ffff:cb00:7109'), 'ip:203.0.113.9');
    // However the IPv6 is spelled: not one shared /64 for every mapped address written out in full.
    for (const address of ['0:0:0:0:0:ffff:cb00:7109', '0::FFFF:203.0.113.9', '[0:0:0:0:0:ffff:cb00:7109]:443'])
      assert.equal(addressKey(address), 'ip:203.0.113.9', address);
    for (const address of ['[2001:db8:a:b::9]', '[2001:db8:a:b::9]:443']) assert.equal(addressKey(address), 'ip6:2001:db8:a:b::/64', address);
    for (const text of ['010.0.0.1', '10.0.0.01', 'unknown', 'a-name:80', '[not-an-address]', '']) assert.equal(addressKey(text), 'ip:unparsed', text);
  });

  it('keys clients by address, believing X-Forwarded-For only from a configured proxy', async () => {
    const direct = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '20', RATE_LIMIT_REFILL_PER_SEC: '0.01' });
    const proxied = await startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '20', RATE_LIMIT_REFILL_PER_SEC: '0.01', TRUST_PROXY: '127.0.0.1' });
    try {
      const remaining = async (target: TestApp, forwardedFor: string) =>
        String((await target.api('GET', '/api/system/health', undefined, { ...anonymous, 'x-forwarded-for': forwardedFor })).headers['ratelimit']);
      // Without a trusted proxy the header is ignored: both "clients" share the socket's bucket.
      assert.match(await remaining(direct, '203.0.113.1'), /r=19;/);
      assert.match(await remaining(direct, '203.0.113.2'), /r=18;/);
      // Behind a trusted proxy each forwarded client has its own bucket.
      assert.match(await remaining(proxied, '203.0.113.1'), /r=19;/);
      assert.match(await remaining(proxied, '203.0.113.2'), /r=19;/);
      // An IPv6 client is its /64: rotating the interface id within it gets no fresh bucket.
      assert.match(await remaining(proxied, '2001:db8:1:2::1'), /r=19;/);
      assert.match(await remaining(proxied, '2001:db8:1:2:dead:beef:0:7'), /r=18;/);
      assert.match(await remaining(proxied, '2001:db8:1:3::1'), /r=19;/, 'another /64 is another client');
    } finally {
      await direct.cleanup();
      await proxied.cleanup();
    }
  });

  it('refuses to start when a route costs more than the bucket holds', async () => {
    await assert.rejects(startTestApp('sqlite', { RATE_LIMIT_CAPACITY: '3', RATE_LIMIT_COSTS: 'session=5' }), (error: unknown) => {
      assert.ok(error instanceof ConfigError, String((error as Error)?.stack ?? error));
      assert.match(error.message, /^RATE_LIMIT_CAPACITY 3 is below what .* costs \(5 tokens, group session\): raise RATE_LIMIT_CAPACITY to at least 5/);
      return true;
    });
  });
});
