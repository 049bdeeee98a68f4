import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { DIALECTS, REDIS_URL, createTestEnv, eventually, startTestApp, type TestApp } from '../helpers/app.js';
import { botRequest } from '../helpers/bot.js';
import { REPLAY } from '../helpers/fixtures.js';
import { startRedis } from '../helpers/services.js';

type Bot = { id: string; shared_secret: string };

/** One signed request, captured: every call sends exactly the same bytes (timestamp, nonce, signature). */
function captured(bot: Bot, method: string, url: string, body?: unknown) {
  const options = { timestamp: Math.floor(Date.now() / 1000), nonce: randomBytes(16).toString('hex') };
  return (app: TestApp) => botRequest(app.http, bot, method, url, body, options);
}

/** What a replay must not change: the bot's quota use and the jobs. */
async function quotaState(app: TestApp, botId: string) {
  const bots = (await app.api('GET', '/api/bots')).body as { id: string; quota: { used: number } }[];
  const jobs = await app.database.db.selectFrom('enrichment_jobs').select('id').execute();
  return { used: bots.find((bot) => bot.id === botId)!.quota.used, jobs: jobs.length };
}

/** Limited through Redis again: the service talks to the restarted (or flushed) Redis. */
const limitedThroughRedis = async (app: TestApp) => (await app.api('GET', '/api/persons')).headers['ratelimit'];

for (const dialect of DIALECTS) {
  describe(`a captured signed request is accepted once, whatever Redis does (${dialect})`, () => {
    /** A service on a private Redis that keeps nothing on disk, a bot, and a completed match for it. */
    async function setUp(redisUrl: string) {
      const app = await startTestApp(dialect, { REDIS_URL: redisUrl, REDIS_PREFIX: `replay${randomBytes(3).toString('hex')}:` });
      const bot = (await app.api('POST', '/api/bots', { id: 'b', name: 'B' })).body as Bot;
      await app.api('POST', '/api/matches', { id: 'm', status: 'completed', replay: REPLAY });
      const post = captured(bot, 'POST', '/api/request-enrichment', { match_id: 'm' });
      const get = captured(bot, 'GET', '/api/matches/m/enrichment');
      const first = await post(app);
      assert.equal(first.status, 202, JSON.stringify(first.body));
      assert.equal(first.body.duplicate, false);
      assert.equal((await get(app)).status, 200);
      assert.equal((await post(app)).status, 401, 'a replay is refused while Redis runs');
      assert.equal((await get(app)).status, 401);
      return { app, post, get, before: await quotaState(app, bot.id), botId: bot.id };
    }

    it('across a restart of a Redis that keeps no data on disk', async () => {
      const redis = await startRedis();
      let app: TestApp | undefined;
      try {
        const setup = await setUp(redis.url);
        app = setup.app;
        await redis.stop();
        await redis.start();
        await eventually(() => limitedThroughRedis(setup.app), 10_000, 'the service back on the restarted Redis');
        const replayed = await setup.post(setup.app);
        assert.equal(replayed.status, 401, JSON.stringify(replayed.body));
        assert.equal((await setup.get(setup.app)).status, 401, 'the signed GET too');
        assert.deepEqual(await quotaState(setup.app, setup.botId), setup.before, 'quota and jobs unchanged');
      } finally {
        await app?.cleanup();
        await redis.stop();
      }
    });

    it('across a FLUSHALL', async () => {
      const redis = await startRedis();
      const client = new Redis(redis.url);
      let app: TestApp | undefined;
      try {
        const setup = await setUp(redis.url);
        app = setup.app;
        assert.equal(await client.flushall(), 'OK');
        assert.equal(await client.dbsize(), 0);
        const replayed = await setup.post(setup.app);
        assert.equal(replayed.status, 401, JSON.stringify(replayed.body));
        assert.equal((await setup.get(setup.app)).status, 401, 'the signed GET too');
        assert.deepEqual(await quotaState(setup.app, setup.botId), setup.before, 'quota and jobs unchanged');
      } finally {
        client.disconnect();
        await app?.cleanup();
        await redis.stop();
      }
    });
  });

  describe(`two instances on one ${dialect} database, each with its own REDIS_PREFIX`, () => {
    it('accept the same signed request once between them, sent one after the other or at once', async () => {
      const env = await createTestEnv(dialect, { REDIS_URL });
      const prefix = `two${randomBytes(3).toString('hex')}`;
      const apps: TestApp[] = [];
      try {
        const start = (name: string) => startTestApp(dialect, { REDIS_PREFIX: `${prefix}${name}:` }, { testEnv: env });
        // On PostgreSQL started at once, neither having seen the other. (Two first starts at once on a
        // new SQLite file race in the migrations, which is not what this test is about.)
        if (dialect === 'postgres') apps.push(...(await Promise.all([start('a'), start('b')])));
        else for (const name of ['a', 'b']) apps.push(await start(name));
        const [one, two] = apps as [TestApp, TestApp];
        const bot = (await one.api('POST', '/api/bots', { id: 'b', name: 'B' })).body as Bot;
        for (const id of ['m1', 'm2']) await one.api('POST', '/api/matches', { id, status: 'completed', replay: REPLAY });

        const post = captured(bot, 'POST', '/api/request-enrichment', { match_id: 'm1' });
        assert.equal((await post(one)).status, 202);
        const replayed = await post(two);
        assert.equal(replayed.status, 401, JSON.stringify(replayed.body));
        const get = captured(bot, 'GET', '/api/matches/m1/enrichment');
        assert.equal((await get(two)).status, 200);
        assert.equal((await get(one)).status, 401, 'the signed GET too');

        const atOnce = captured(bot, 'POST', '/api/request-enrichment', { match_id: 'm2' });
        const statuses = (await Promise.all([atOnce(one), atOnce(two)])).map((response) => response.status).sort();
        assert.deepEqual(statuses, [202, 401]);
        assert.deepEqual(await quotaState(two, bot.id), { used: 2, jobs: 2 });
      } finally {
        for (const app of apps) await app.cleanup();
        await env.cleanup();
      }
    });
  });
}
