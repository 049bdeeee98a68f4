import { describe, it } from 'node:test';
import { sql } from 'kysely';
import { holdAdvisoryLock } from '../helpers/locks.js';
import type { FastifyBaseLogger } from 'fastify';
import assert from 'node:assert/strict';
import { createTestEnv, eventually, startTestApp } from '../helpers/app.js';
import { botRequest } from '../helpers/bot.js';
import { REPLAY } from '../helpers/fixtures.js';
import { spawnMothership, stopProcess } from '../helpers/process.js';
import { deferred } from '../helpers/deferred.js';
import { startPostgres, startRedis } from '../helpers/services.js';
import { MqttLeadership } from '../../src/mqtt/index.js';

describe('Redis stopped under the limiter', () => {
  it('fails open by default: requests pass, the failure is counted; bot requests keep their replay protection', async () => {
    const redis = await startRedis();
    const app = await startTestApp('sqlite', { REDIS_URL: redis.url, REDIS_PREFIX: 'fault:' });
    try {
      const bot = (await app.api('POST', '/api/bots', { id: 'b', name: 'B' })).body;
      await app.api('POST', '/api/matches', { id: 'm', status: 'completed', replay: REPLAY });
      const before = await app.api('GET', '/api/persons');
      assert.equal(before.status, 200);
      assert.ok(before.headers['ratelimit'], 'limited through Redis');
      await redis.stop();
      const during = await app.api('GET', '/api/persons');
      assert.equal(during.status, 200, 'fail-open');
      assert.equal(during.headers['ratelimit'], undefined);
      // Nonces are in the database: a signed request passes once, its replay is refused.
      const captured = { nonce: 'captured-while-redis-is-away', timestamp: Math.floor(Date.now() / 1000) };
      const signed = await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'm' }, captured);
      assert.equal(signed.status, 202, JSON.stringify(signed.body));
      assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'm' }, captured)).status, 401);
      assert.match((await app.api('GET', '/metrics')).body, /mothership_ratelimit_store_errors_total [1-9]/);
      await redis.start();
      await eventually(async () => (await app.api('GET', '/api/persons')).headers['ratelimit'], 5000, 'limiting again after Redis returns');
      assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: 'm' })).status, 202);
    } finally {
      await app.cleanup();
      await redis.stop();
    }
  });

  it('fails closed when configured: 503 with Retry-After', async () => {
    const redis = await startRedis();
    const app = await startTestApp('sqlite', { REDIS_URL: redis.url, RATE_LIMIT_REDIS_FAILURE: 'closed' });
    try {
      await redis.stop();
      const response = await app.api('GET', '/api/persons');
      assert.equal(response.status, 503);
      assert.equal(response.body.code, 'service_unavailable');
      assert.equal(response.headers['retry-after'], '5');
    } finally {
      await app.cleanup();
    }
  });
});

describe('Redis frozen under the limiter (SIGSTOP)', () => {
  for (const failure of ['open', 'closed'] as const)
    it(`answers within REDIS_COMMAND_TIMEOUT_MS, failing ${failure}, and limits again after SIGCONT (outside review: every request hung)`, async () => {
      const redis = await startRedis();
      const app = await startTestApp('sqlite', { REDIS_URL: redis.url, REDIS_PREFIX: `frozen-${failure}:`, RATE_LIMIT_REDIS_FAILURE: failure });
      /** The response, or 'hung' when none came within 5 s. */
      const within = <T>(request: Promise<T>) => Promise.race([request, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 5000).unref())]);
      try {
        assert.ok((await app.api('GET', '/api/persons')).headers['ratelimit'], 'limited through Redis');
        redis.freeze();
        const during = await Promise.all(Array.from({ length: 5 }, () => within(app.api('GET', '/api/persons'))));
        for (const response of during) {
          assert.notEqual(response, 'hung', 'a request hung on the frozen Redis');
          if (response !== 'hung') assert.equal(response.status, failure === 'open' ? 200 : 503, JSON.stringify(response.body));
        }
        redis.thaw();
        await eventually(async () => (await app.api('GET', '/api/persons')).headers['ratelimit'], 5000, 'limiting again after SIGCONT');
      } finally {
        redis.thaw();
        await app.cleanup();
        await redis.stop();
      }
    });
});

describe('PostgreSQL restarted under load', () => {
  it('the service recovers by itself: no 500, only brief 503s, and every acknowledged change is kept', async () => {
    const postgres = await startPostgres();
    const app = await startTestApp('postgres', { DATABASE_URL: postgres.url });
    try {
      const statuses = new Map<number, number>();
      const acknowledged: string[] = [];
      let running = true;
      let n = 0;
      const worker = async () => {
        while (running) {
          const id = `p${n++}`;
          const response = await app.api('POST', '/api/persons', { id, name: id });
          statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
          if (response.status === 201) acknowledged.push(id);
          if (response.status === 503) await new Promise((resolve) => setTimeout(resolve, 50));
        }
      };
      const workers = Array.from({ length: 4 }, worker);
      await eventually(() => acknowledged.length >= 50, 10_000, 'load before the restart');
      await postgres.restart();
      const before = acknowledged.length;
      await eventually(() => acknowledged.length >= before + 50, 15_000, 'load after the restart');
      running = false;
      await Promise.all(workers);
      assert.deepEqual(
        [...statuses.keys()].filter((status) => status !== 201 && status !== 503),
        [],
        JSON.stringify([...statuses]),
      );
      const stored = new Set((await app.api('GET', '/api/persons')).body.map((person: { id: string }) => person.id));
      assert.ok(
        acknowledged.every((id) => stored.has(id)),
        'an acknowledged person is missing',
      );
    } finally {
      await app.cleanup();
      await postgres.destroy();
    }
  });
});

describe('readiness while PostgreSQL is away', () => {
  it('answers 503 not_ready with "unreachable", never the driver\'s message (the route is public)', async () => {
    const postgres = await startPostgres();
    const app = await startTestApp('postgres', { DATABASE_URL: postgres.url });
    try {
      assert.equal((await app.api('GET', '/readyz', undefined, { authorization: '' })).body.database, 'ok');
      await postgres.stop();
      const ready = await app.api('GET', '/readyz', undefined, { authorization: '' });
      assert.equal(ready.status, 503);
      assert.deepEqual([ready.body.status, ready.body.database], ['not_ready', 'unreachable']);
      assert.doesNotMatch(JSON.stringify(ready.body), /ECONNREFUSED|127\.0\.0\.1|postgres|terminat/i);
    } finally {
      await app.cleanup();
      await postgres.destroy();
    }
  });
});

describe('PostgreSQL frozen (SIGSTOP)', () => {
  it('requests get 503 with Retry-After within the timeout, readiness says unreachable, and the service recovers after SIGCONT', async () => {
    const postgres = await startPostgres();
    const app = await startTestApp('postgres', { DATABASE_URL: postgres.url, DATABASE_TIMEOUT_MS: '1000' });
    let frozen = false;
    /** The response, or 'hung' when none came within 5 s (the timeout is 1 s). */
    const within = <T>(request: Promise<T>) => Promise.race([request, new Promise<'hung'>((resolve) => setTimeout(() => resolve('hung'), 5000).unref())]);
    try {
      assert.equal((await app.api('POST', '/api/persons', { id: 'before', name: 'Before' })).status, 201);
      postgres.freeze();
      frozen = true;
      // More at once than the pool has connections: none may wait for a connection forever either.
      const responses = await Promise.all(
        Array.from({ length: 15 }, (_, i) =>
          within(i % 3 ? app.api('GET', '/api/persons') : app.api('POST', '/api/persons', { id: `frozen${i}`, name: 'Frozen' })),
        ),
      );
      for (const response of responses) {
        assert.notEqual(response, 'hung', 'a request hung on the frozen database');
        if (response === 'hung') continue;
        assert.equal(response.status, 503, JSON.stringify(response.body));
        assert.equal(response.headers['content-type'], 'application/problem+json; charset=utf-8');
        assert.equal(response.body.code, 'service_unavailable');
        assert.ok(Number(response.headers['retry-after']) > 0);
      }
      const ready = await within(app.api('GET', '/readyz', undefined, { authorization: '' }));
      assert.notEqual(ready, 'hung');
      if (ready !== 'hung') assert.deepEqual([ready.status, ready.body.database], [503, 'unreachable']);
      // Still answered in time once every connection is taken by a query the server never answered.
      const again = await within(app.api('GET', '/api/persons'));
      assert.notEqual(again, 'hung');
      if (again !== 'hung') assert.equal(again.status, 503);

      postgres.thaw();
      frozen = false;
      await eventually(async () => (await app.api('GET', '/readyz', undefined, { authorization: '' })).body.database === 'ok', 15_000, 'ready again');
      await eventually(async () => (await app.api('POST', '/api/persons', { id: 'after', name: 'After' })).status === 201, 15_000, 'writes again');
      // Writes on every pooled connection: none may carry on a transaction a 503 answered.
      const later = await Promise.all(Array.from({ length: 20 }, (_, i) => app.api('POST', '/api/persons', { id: `later${i}`, name: 'Later' })));
      assert.deepEqual(
        later.map((response) => response.status),
        Array(20).fill(201),
        JSON.stringify(later.find((response) => response.status !== 201)?.body),
      );
      const stored = (await app.api('GET', '/api/persons')).body.map((person: { id: string }) => person.id);
      assert.ok(stored.includes('before') && stored.includes('after'), JSON.stringify(stored));
      assert.deepEqual(
        stored.filter((id: string) => id.startsWith('frozen')),
        [],
        'a write answered 503 was not stored',
      );
    } finally {
      if (frozen) postgres.thaw();
      await app.cleanup();
      await postgres.destroy();
    }
  });
});

describe('a PostgreSQL query past DATABASE_TIMEOUT_MS', () => {
  it('answers 503 and its connection never carries the transaction on: the write is not stored by a later commit (outside review)', async () => {
    const app = await startTestApp('postgres', { DATABASE_TIMEOUT_MS: '1000' });
    const LOCK = 77_002;
    try {
      // An insert that waits past the timeout, then goes on once the test lets it.
      await sql
        .raw(
          `create function person_waits() returns trigger language plpgsql as $$ begin perform pg_advisory_lock(${LOCK}); perform pg_advisory_unlock(${LOCK}); return new; end $$;
           create trigger person_waits before insert on persons for each row when (new.id = 'stalled') execute function person_waits()`,
        )
        .execute(app.database.db);
      const lock = await holdAdvisoryLock(app.database.db, LOCK);
      try {
        const stalled = await app.api('POST', '/api/persons', { id: 'stalled', name: 'Stalled' });
        assert.equal(stalled.status, 503, JSON.stringify(stalled.body));
        for (let i = 0; i < 3; i++) assert.equal((await app.api('POST', '/api/persons', { id: 'stalled', name: 'Stalled' })).status, 503);
        // The server gave up each statement too: none goes on waiting there, each on a connection of its
        // own, until the server has none left (outside review: one more a timeout).
        const waiting = await sql<{
          count: number;
        }>`select count(*)::int as count from pg_stat_activity where datname = current_database() and wait_event = 'advisory' and pid <> pg_backend_pid()`.execute(
          app.database.db,
        );
        assert.equal(waiting.rows[0]!.count, 0, 'statements left waiting on the server');
      } finally {
        await lock.release();
      }
      // The connection that timed out is the pool's most recently released: the next writes take it first.
      for (let i = 0; i < 12; i++) {
        const response = await app.api('POST', '/api/persons', { id: `later${i}`, name: 'Later' });
        assert.equal(response.status, 201, JSON.stringify(response.body));
      }
      const stored = (await app.api('GET', '/api/persons')).body.map((person: { id: string }) => person.id);
      assert.ok(!stored.includes('stalled'), `the write answered 503 was stored: ${JSON.stringify(stored)}`);
    } finally {
      await app.cleanup();
    }
  });
});

describe('an instance frozen inside a transaction on PostgreSQL', () => {
  it('is ended by the server after DATABASE_TIMEOUT_MS, so its row locks stop no other instance (outside review: every write 503 while frozen)', async () => {
    const env = await createTestEnv('postgres', { DATABASE_TIMEOUT_MS: '1000' });
    const first = await startTestApp('postgres', { DATABASE_TIMEOUT_MS: '1000' }, { testEnv: env });
    const second = await startTestApp('postgres', { DATABASE_TIMEOUT_MS: '1000' }, { testEnv: env });
    const frozen = deferred<void>();
    try {
      assert.equal((await first.api('POST', '/api/persons', { id: 'held', name: 'Held' })).status, 201);
      // The first instance locks the row, then stops sending, as a frozen process would.
      const locked = deferred<void>();
      const transaction = first.database
        .transaction(async (db) => {
          await sql`select id from persons where id = 'held' for update`.execute(db);
          locked.resolve();
          await frozen.promise;
          await sql`select 1`.execute(db);
        })
        .then(
          () => 'committed',
          () => 'ended',
        );
      await locked.promise;
      await eventually(
        async () => {
          const { rows } = await sql<{ count: number }>`select count(*)::int as count from pg_stat_activity
            where datname = current_database() and state = 'idle in transaction'`.execute(second.database.db);
          return rows[0]!.count === 0;
        },
        10_000,
        'the server to end the session idle in its transaction',
      );
      const renamed = await second.api('PATCH', '/api/persons/held', { name: 'Renamed' });
      assert.equal(renamed.status, 200, JSON.stringify(renamed.body));
      frozen.resolve();
      assert.equal(await transaction, 'ended', 'the frozen transaction did not commit after the server ended it');
    } finally {
      frozen.resolve();
      await second.cleanup();
      await first.cleanup();
      await env.cleanup();
    }
  });
});

describe('MQTT leadership while PostgreSQL is frozen (SIGSTOP)', () => {
  it('gives MQTT up within DATABASE_TIMEOUT_MS instead of waiting on its session for good', async () => {
    const postgres = await startPostgres();
    const silent = { info: () => {}, warn: () => {} } as unknown as FastifyBaseLogger;
    const leadership = new MqttLeadership(postgres.url, 'frozen-test', silent, { pollMs: 100, timeoutMs: 500 });
    const changes: boolean[] = [];
    let frozen = false;
    try {
      await leadership.start(async (leader) => void changes.push(leader));
      assert.deepEqual(changes, [true]);
      postgres.freeze();
      frozen = true;
      await eventually(() => changes.length === 2, 5000, 'MQTT given up');
      assert.deepEqual(changes, [true, false]);
    } finally {
      if (frozen) postgres.thaw();
      await leadership.stop();
      await postgres.destroy();
    }
  });
});

describe('MQTT leadership: reports sent at once', () => {
  it('go one after another on the session (node-postgres deprecates queueing a query behind another)', async () => {
    const env = await createTestEnv('postgres');
    const app = await startTestApp('postgres', {}, { testEnv: env });
    const silent = { info: () => {}, warn: () => {} } as unknown as FastifyBaseLogger;
    const leadership = new MqttLeadership(env.env.DATABASE_URL!, 'report-test', silent, { pollMs: 100, timeoutMs: 5000 });
    const warnings: string[] = [];
    const onWarning = (warning: Error) => warnings.push(warning.message);
    process.on('warning', onWarning);
    try {
      await leadership.start(async () => {});
      const status = { enabled: true, connected: true, last_error: null, last_connected_at: null, next_reconnect_at: null };
      for (let i = 0; i < 20; i++) leadership.report({ ...status, connected: i % 2 === 0 });
      await eventually(async () => {
        const row = await app.database.db.selectFrom('settings').select('value').where('key', '=', 'mqtt.owner').executeTakeFirst();
        return row && (JSON.parse(row.value) as { connected: boolean }).connected === false;
      });
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(
        warnings.filter((message) => /already executing a query/.test(message)),
        [],
      );
    } finally {
      process.off('warning', onWarning);
      await leadership.stop();
      await app.cleanup();
      await env.cleanup();
    }
  });
});

describe('two standalone workers racing on PostgreSQL', () => {
  it('each job runs exactly once to completion', async () => {
    const env = await createTestEnv('postgres');
    const app = await startTestApp('postgres', {}, { testEnv: env });
    const workers = [spawnMothership(['worker'], env.env), spawnMothership(['worker'], env.env)];
    try {
      const jobs = 20;
      for (let b = 0; b < jobs / 5; b++) {
        const bot = (await app.api('POST', '/api/bots', { id: `bot${b}`, name: `Bot ${b}` })).body;
        for (let m = 0; m < 5; m++) {
          const id = `m${b}-${m}`;
          await app.api('POST', '/api/matches', { id, status: 'completed', replay: REPLAY });
          assert.equal((await botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: id })).status, 202);
        }
      }
      await eventually(
        async () => (await app.database.db.selectFrom('enrichment_jobs').select('state').where('state', '!=', 'completed').execute()).length === 0,
        20_000,
        'all jobs completed',
      );
      const rows = await app.database.db.selectFrom('enrichment_jobs').select(['attempts']).execute();
      assert.equal(rows.length, jobs);
      assert.ok(
        rows.every((row) => row.attempts === 1),
        'no job ran twice',
      );
      const completed = (await app.api('GET', '/api/events?limit=1000')).body.events.filter(
        (event: { event_type: string }) => event.event_type === 'enrichment.completed',
      );
      assert.equal(completed.length, jobs);
    } finally {
      for (const worker of workers) await stopProcess(worker);
      await app.cleanup();
      await env.cleanup();
    }
  });
});
