import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createTestEnv, eventually, startTestApp } from '../helpers/app.js';
import { freePort } from '../helpers/broker.js';
import { spawnMothership, stopProcess } from '../helpers/process.js';
import { startRedis } from '../helpers/services.js';

const readyz = async (base: string) => {
  const response = await fetch(`${base}/readyz`);
  return { status: response.status, body: (await response.json()) as { status: string; checks: Record<string, string> } };
};

describe('/readyz with Redis configured', () => {
  for (const { failure, readyWithout } of [
    { failure: 'closed', readyWithout: false },
    { failure: 'open', readyWithout: true },
  ] as const) {
    it(`reports Redis away, naming it, and is ${readyWithout ? 'still ready (the rate limit lets requests through)' : 'not ready (every limited request fails)'} with RATE_LIMIT_REDIS_FAILURE=${failure}`, async () => {
      const redis = await startRedis();
      const app = await startTestApp('sqlite', { REDIS_URL: redis.url, REDIS_PREFIX: `readyz-${failure}:`, RATE_LIMIT_REDIS_FAILURE: failure });
      try {
        const ready = await app.api('GET', '/readyz', undefined, { authorization: '' });
        assert.equal(ready.status, 200, JSON.stringify(ready.body));
        assert.deepEqual(ready.body.checks, { database: 'ok', redis: 'ok', disk: 'ok' });
        await redis.stop();
        const away = await app.api('GET', '/readyz', undefined, { authorization: '' });
        assert.equal(away.status, readyWithout ? 200 : 503);
        assert.equal(away.body.status, readyWithout ? 'ready' : 'not_ready');
        assert.equal(away.body.checks.redis, 'unreachable');
        assert.equal(away.body.checks.database, 'ok');
        // The route is public: no address, no driver message.
        assert.doesNotMatch(JSON.stringify(away.body), new RegExp(String.raw`127\.0\.0\.1|${new URL(redis.url).port}|ECONNREFUSED|writeable`));
        await redis.start();
        await eventually(
          async () => (await app.api('GET', '/readyz', undefined, { authorization: '' })).body.checks.redis === 'ok',
          10_000,
          'Redis ok again once it returns',
        );
      } finally {
        await app.cleanup();
        await redis.stop();
      }
    });
  }

  it('without Redis configured, has no Redis check', async () => {
    const app = await startTestApp('sqlite');
    try {
      const ready = await app.api('GET', '/readyz', undefined, { authorization: '' });
      assert.equal(ready.status, 200);
      assert.deepEqual(ready.body.checks, { database: 'ok', disk: 'ok' });
    } finally {
      await app.cleanup();
    }
  });
});

describe('an unreachable REDIS_URL at start', () => {
  it('is logged naming host and port, never the password, and /readyz reports it', async () => {
    const redisPort = await freePort();
    const cases = [
      { url: `redis://mothership:s3cret-Passw0rd@127.0.0.1:${redisPort}/0`, where: `127.0.0.1:${redisPort}`, reason: /connection refused/ },
      { url: 'redis://:an0ther-Secret@redis.invalid:6390/2', where: 'redis.invalid:6390', reason: /host not found/ },
    ];
    await Promise.all(
      cases.map(async ({ url, where, reason }) => {
        const env = await createTestEnv('sqlite', { REDIS_URL: url, LOG_LEVEL: 'info', LOG_FORMAT: 'json' });
        const port = await freePort();
        const service = spawnMothership(['serve'], { ...env.env, PORT: String(port) });
        try {
          const startLine = () =>
            service
              .output()
              .split('\n')
              .find((text) => text.includes(where) && /REDIS_URL/.test(text));
          const line = await eventually(startLine, 30_000, `a start-up line naming ${where}`);
          assert.equal((JSON.parse(line) as { level: number }).level, 40, 'a warning');
          assert.match(line, reason);
          const away = await eventually(() => readyz(`http://127.0.0.1:${port}`).catch(() => null), 30_000, 'the service answers');
          assert.equal(away.status, 200, 'the rate limit fails open (the default): ready');
          assert.equal(away.body.checks.redis, 'unreachable');
          assert.doesNotMatch(service.output(), /s3cret-Passw0rd|an0ther-Secret/);
        } finally {
          await stopProcess(service);
          await env.cleanup();
        }
      }),
    );
  });
});
