import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { Kysely, Migrator, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { Database, DELIVERY_ROW_OVERHEAD, deletionMark, pruneOldest, reclaim, storageBytes, storedRowBytes } from '../src/db/index.js';
import { migrations, USAGE_SHARDS } from '../src/db/migrations.js';
import { EVENT_APPEND_LOCK, STORED_DELIVERY_BYTES_SQL, STORED_ROW_BYTES_SQL } from '../src/db/schema.js';
import { SecretBox } from '../src/crypto.js';
import type { DomainError } from '../src/errors.js';
import { EVENT_LOG } from '../src/events/index.js';
import { createEventPipeline } from '../src/pipeline.js';
import { budgetLevels, StorageBudget, WriterShares } from '../src/storage-budget.js';
import { FINISHED_DELIVERY_LOGS } from '../src/webhook/index.js';
import { createPgDatabase, DIALECTS, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';
import { startPostgres } from './helpers/services.js';

const MB = 2 ** 20;
const BUDGET_MB = 1;
/** The fair share's test: 5 % of it holds a household's 60 moves with their deliveries. */
const SHARE_BUDGET_MB = 8;
const hoursAgo = (hours: number) => new Date(Date.now() - hours * 3600_000).toISOString();

describe('writer shares', () => {
  it('a writer alone is within its share; a flooder is above it, a small writer beside it is not; faded writers are forgotten', () => {
    const shares = new WriterShares(10_000);
    assert.equal(shares.record('token:a', 1_000_000, 0), false, 'alone');
    assert.equal(shares.record('token:b', 500, 100), false, 'small beside a flooder');
    assert.equal(shares.record('token:a', 8_000, 200), true, 'the flooder');
    // Long after, a's million bytes have faded below b's fresh writes.
    assert.equal(shares.record('token:b', 500, 200_000), true, 'b now writes most');
    shares.forget(1_000_000);
    assert.equal(shares.record('token:c', 10, 1_000_000), false, 'every other writer forgotten: c is alone');
  });
});

describe('storage budget levels', () => {
  it('prunes above 85 % down to 75 %, refuses writers above their fair share from 90 %, every writer from 95 %', () => {
    assert.deepEqual(budgetLevels(1000), { high: 850, low: 750, share: 900, refuse: 950 });
  });
});

/**
 * An app with a small storage budget and a webhook to a receiver that answers 200. `start: false`: no
 * background work, so no keeper deletes and the budget's levels are reached however fast it would.
 */
async function budgetedApp(dialect: (typeof DIALECTS)[number], { start = true, budgetMb = BUDGET_MB } = {}) {
  const receiver = await startReceiver(200);
  const app = await startTestApp(dialect, { STORAGE_BUDGET_MB: String(budgetMb) }, { start });
  assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
  return { app, receiver };
}

for (const dialect of DIALECTS) {
  describe(`storage budget (${dialect})`, () => {
    let app: TestApp;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;

    before(async () => {
      ({ app, receiver } = await budgetedApp(dialect));
    });
    after(async () => {
      await app.cleanup();
      await receiver.close();
    });

    it('holds under a write loop: the oldest events go, every event is taken, the database never passes the budget', async () => {
      const writes = 400;
      const blob = 'x'.repeat(4_000); // within the 4096 bytes an anomaly's detail may take
      let largest = 0;
      for (let i = 0; i < writes; i++) {
        const send = () => app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { i, blob } });
        let response = await send();
        while (response.status === 503) {
          assert.equal(response.body.code, 'storage_full');
          assert.equal(response.headers['retry-after'], '1');
          // The keeper makes room within moments; the writer retries, as Retry-After asks.
          await new Promise((resolve) => setTimeout(resolve, 20));
          response = await send();
        }
        assert.equal(response.status, 202, JSON.stringify(response.body));
        largest = Math.max(largest, await storageBytes(app.database));
      }
      assert.ok(largest <= BUDGET_MB * MB, `the database reached ${(largest / MB).toFixed(2)} MiB, over the ${BUDGET_MB} MiB budget`);
      const kept = await app.database.db.selectFrom('events').select(['seq', 'payload']).where('event_type', '=', 'anomaly.detected').orderBy('seq').execute();
      const numbers = kept.map((row) => (JSON.parse(row.payload) as { detail: { i: number } }).detail.i);
      assert.ok(numbers.length < writes / 2, `${numbers.length} of ${writes} events kept: the oldest were pruned`);
      assert.equal(numbers.at(-1), writes - 1, 'the newest event is kept');
      assert.deepEqual(
        numbers,
        Array.from({ length: numbers.length }, (_, k) => writes - numbers.length + k),
        'what is kept is the newest, without gaps',
      );
    });
  });

  describe(`storage budget: what goes first (${dialect})`, () => {
    let app: TestApp;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;

    before(async () => {
      receiver = await startReceiver(200);
      // No budget of its own: the pass under test is the only one that deletes.
      app = await startTestApp(dialect, { STORAGE_BUDGET_MB: '0' }, { start: true });
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
    });
    after(async () => {
      await app.cleanup();
      await receiver.close();
    });

    it('prunes oldest first across both logs, and never a pending delivery, which is still sent after its event went', async () => {
      const db = app.database.db;
      const payload = (hour: number) => JSON.stringify({ event_type: 'anomaly.detected', hour, pad: 'p'.repeat(8000) });
      // Events at even hours, finished deliveries at odd hours, oldest first; and the oldest row of
      // all, a pending delivery of the first event, not due yet.
      const hours = Array.from({ length: 120 }, (_, k) => 240 - 2 * k);
      await db
        .insertInto('events')
        .values(hours.map((hour) => ({ event_type: 'anomaly.detected', timestamp: hoursAgo(hour), payload: payload(hour) })))
        .execute();
      const [first] = await db.selectFrom('events').select('seq').orderBy('seq').limit(1).execute();
      const delivery = (hour: number, state: 'delivered' | 'failed' | 'pending') => ({
        webhook_id: `msg_budget_${hour}`,
        event_seq: state === 'pending' ? first!.seq : null,
        event_type: 'anomaly.detected',
        url: receiver.url,
        payload: payload(hour),
        attempt: 1,
        state,
        due_at: state === 'pending' ? hoursAgo(-1) : hoursAgo(hour),
        created_at: hoursAgo(hour),
      });
      await db
        .insertInto('webhook_deliveries')
        .values([delivery(300, 'pending'), ...hours.map((hour, k) => delivery(hour - 1, k % 3 ? 'delivered' : 'failed'))])
        .execute();

      const used = await storageBytes(app.database);
      const budget = new StorageBudget(app.database, used, [EVENT_LOG, ...FINISHED_DELIVERY_LOGS]);
      assert.ok((await budget.keep()) > 0);
      assert.ok((await storageBytes(app.database)) <= budgetLevels(used).low, 'down to 75 % of the budget');

      const events = await db.selectFrom('events').select(['timestamp']).execute();
      const finished = await db.selectFrom('webhook_deliveries').select(['created_at']).where('state', '!=', 'pending').execute();
      const keptTimes = [...events.map((row) => row.timestamp), ...finished.map((row) => row.created_at)].sort();
      const allTimes = [...hours.map((hour) => hoursAgo(hour)), ...hours.map((hour) => hoursAgo(hour - 1))].map((time) => time.slice(0, 13));
      const deleted = allTimes.filter((time) => !keptTimes.some((kept) => kept.startsWith(time))).sort();
      assert.ok(deleted.length > 10, `${deleted.length} rows pruned`);
      assert.ok(deleted.at(-1)! < keptTimes[0]!.slice(0, 13), `oldest first: deleted up to ${deleted.at(-1)}, kept from ${keptTimes[0]}`);

      const pending = await db.selectFrom('webhook_deliveries').selectAll().where('state', '=', 'pending').execute();
      assert.equal(pending.length, 1, 'the pending delivery is kept, older than everything pruned');
      assert.equal((await db.selectFrom('events').select('seq').where('seq', '=', first!.seq).execute()).length, 0, 'its event was pruned');
      await db
        .updateTable('webhook_deliveries')
        .set({ due_at: hoursAgo(0) })
        .where('id', '=', pending[0]!.id)
        .execute();
      app.webhook.kick();
      const sent = await eventually(
        () => receiver.received.find((request) => request.headers['webhook-id'] === 'msg_budget_300'),
        5000,
        'the pending delivery',
      );
      assert.equal(sent.body, payload(300), 'sent from its own copy of the event');
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`storage budget: one deleting statement (${dialect})`, () => {
    it('deletes about a chunk of the oldest rows across logs that interleave in time, not one row per log', async () => {
      const app = await startTestApp(dialect, { STORAGE_BUDGET_MB: '0' });
      try {
        const db = app.database.db;
        // An event, then its delivery a moment later, hour after hour: the logs alternate in time.
        const hours = Array.from({ length: 300 }, (_, k) => 600 - 2 * k);
        await db
          .insertInto('events')
          .values(hours.map((hour) => ({ event_type: 'anomaly.detected', timestamp: hoursAgo(hour), payload: '{}' })))
          .execute();
        await db
          .insertInto('webhook_deliveries')
          .values(
            hours.map((hour) => ({
              webhook_id: `msg_interleaved_${hour}`,
              event_seq: null,
              event_type: 'anomaly.detected',
              url: 'http://127.0.0.1:9/hook',
              payload: '{}',
              attempt: 1,
              state: 'delivered' as const,
              due_at: hoursAgo(hour - 1),
              created_at: hoursAgo(hour - 1),
            })),
          )
          .execute();
        const { rows: deleted } = await pruneOldest(app.database, [EVENT_LOG, ...FINISHED_DELIVERY_LOGS], 100);
        assert.equal(deleted, 100, 'one call deletes a chunk');
        const events = await db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<string | number>().as('count'))
          .executeTakeFirstOrThrow();
        const deliveries = await db
          .selectFrom('webhook_deliveries')
          .select((eb) => eb.fn.countAll<string | number>().as('count'))
          .executeTakeFirstOrThrow();
        assert.deepEqual([Number(events.count), Number(deliveries.count)], [250, 250], 'the 50 oldest of each log, the 100 oldest of all');
      } finally {
        await app.cleanup();
      }
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`storage budget: the pass an append starts (${dialect})`, () => {
    it('runs outside the appending transaction: it deletes, and no pass fails', async () => {
      const app = await startTestApp(dialect, { STORAGE_BUDGET_MB: '1' });
      const failures: string[] = [];
      const warn = app.http.log.warn.bind(app.http.log);
      app.http.log.warn = ((fields: { err?: Error }, message?: string) => {
        if (message?.startsWith('storage budget')) failures.push(`${message}: ${fields.err?.message}`);
        warn(fields, message);
      }) as typeof app.http.log.warn;
      try {
        await app.start();
        const writes = 300;
        for (let i = 0; i < writes; i++) {
          const send = () => app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { i, blob: 'x'.repeat(3000) } });
          let response = await send();
          while (response.status === 503) response = await send();
          assert.equal(response.status, 202, JSON.stringify(response.body));
        }
        const [{ count }] = await app.database.db
          .selectFrom('events')
          .select((eb) => eb.fn.countAll<string | number>().as('count'))
          .where('event_type', '=', 'anomaly.detected')
          .execute();
        assert.ok(Number(count) < writes, `${count} of ${writes} events kept: the oldest were deleted`);
        assert.deepEqual(failures, []);
      } finally {
        await app.cleanup();
      }
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`storage budget: a fair share per writer (${dialect})`, () => {
    let app: TestApp;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;

    before(async () => {
      // The keeper kept up with the flood, so the share's level was not reached: it does not run here,
      // and the household's moves take the headroom between the share's level and the refusal's.
      ({ app, receiver } = await budgetedApp(dialect, { start: false, budgetMb: SHARE_BUDGET_MB }));
      for (const zone of ['hall', 'kitchen']) assert.equal((await app.api('POST', '/api/zones', { id: zone, name: zone })).status, 201);
      assert.equal((await app.api('POST', '/api/persons', { id: 'resident', name: 'Resident' })).status, 201);
    });
    after(async () => {
      await app.cleanup();
      await receiver.close();
    });

    it("an ingest token flooding large events at the budget gets refused, another token's zone moves and falls never are", async () => {
      const tokenOf = async (name: string) => (await app.api('POST', '/api/tokens', { name, scope: 'ingest' })).body.token as string;
      const [flooder, household] = [await tokenOf('flooder'), await tokenOf('household')];
      const post = (token: string, body: unknown) => app.api('POST', '/api/events', body, { authorization: `Bearer ${token}` });
      const blob = 'x'.repeat(4_000);
      const floodAnswers: Record<number, number> = {};
      let largest = 0;
      let flooding = true;
      let reachedBudget: () => void;
      const atBudget = new Promise<void>((resolve) => (reachedBudget = resolve));
      const flood = async (loop: number) => {
        for (let i = 0; flooding; i++) {
          const response = await post(flooder, { type: 'anomaly.detected', detail: { loop, i, blob } });
          floodAnswers[response.status] = (floodAnswers[response.status] ?? 0) + 1;
          if (response.status === 503) reachedBudget();
          largest = Math.max(largest, await storageBytes(app.database));
        }
      };
      const floods = [0, 1, 2, 3].map(flood);
      try {
        await atBudget;
        const refused: string[] = [];
        for (let i = 0; i < 60; i++) {
          const body =
            i % 10 === 9
              ? { type: i % 20 === 9 ? 'fall.detected' : 'fall.cleared', person: 'resident', zone: 'hall' }
              : { type: 'zone.entry', person: 'resident', zone: i % 2 ? 'hall' : 'kitchen' };
          const response = await post(household, body);
          if (response.status !== 202) refused.push(`${body.type}: ${response.status} ${response.body.code}`);
        }
        assert.deepEqual(refused, [], 'the household token is never refused for the flooder');
      } finally {
        flooding = false;
        await Promise.all(floods);
      }
      assert.ok((floodAnswers[503] ?? 0) > 0 && (floodAnswers[202] ?? 0) > 0, `the flooder: ${JSON.stringify(floodAnswers)}`);
      assert.ok(largest <= SHARE_BUDGET_MB * MB, `the database reached ${(largest / MB).toFixed(2)} MiB, over the ${SHARE_BUDGET_MB} MiB budget`);
    });
  });

  describe(`storage budget: refused on what the database takes (${dialect})`, () => {
    it("an append that would pass the refusal level is refused, measured with the database's own overhead", async () => {
      // No budget of the app's own: the one under test is the only one, and no keeper deletes.
      const app = await startTestApp(dialect, { STORAGE_BUDGET_MB: '0' });
      try {
        // Each event with its delivery's copy, as in the service.
        assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/hook' } })).status, 200);
        const budgetBytes = (await storageBytes(app.database)) + MB;
        const budget = new StorageBudget(app.database, budgetBytes, [EVENT_LOG]);
        await budget.keep(); // measures
        const { events: log } = createEventPipeline(app.database, new SecretBox(app.config.secretsKey), [budget]);
        let refused = false;
        for (let i = 0; i < 1000 && !refused; i++) {
          await log.emit('anomaly.detected', { detail: { i, blob: 'x'.repeat(4_000) } }).catch((error: DomainError) => {
            assert.equal(error.code, 'storage_full');
            refused = true;
          });
        }
        assert.ok(refused, 'refused before 1000 events');
        const used = await storageBytes(app.database);
        assert.ok(
          used <= budgetLevels(budgetBytes).refuse,
          `the database takes ${(used / MB).toFixed(2)} MiB, over the refusal level of ${((0.95 * budgetBytes) / MB).toFixed(2)} MiB`,
        );
      } finally {
        await app.cleanup();
      }
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`storage budget: webhook retries (${dialect})`, () => {
    it("a retry's copy of its event counts against the budget as soon as it is written, not at the next measurement", async () => {
      const receiver = await startReceiver(500);
      const app = await startTestApp(dialect, { STORAGE_BUDGET_MB: String(BUDGET_MB), WEBHOOK_RETRY_DELAY_MS: '60000' }, { start: true });
      const counted = async () => {
        const { body } = await app.api('GET', '/metrics');
        return Number(/^mothership_storage_bytes (\d+)/m.exec(body as string)![1]);
      };
      try {
        assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
        // The first attempt is held until the count before its retry is read.
        let answer!: (response: ServerResponse) => void;
        const attempted = new Promise<ServerResponse>((resolve) => (answer = resolve));
        receiver.answerNext((response) => answer(response));
        assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { blob: randomBytes(3_000).toString('base64') } })).status, 202);
        const firstAttempt = await attempted;
        const before = await counted();
        firstAttempt.writeHead(500).end();
        const retry = () => app.database.db.selectFrom('webhook_deliveries').select('payload').where('attempt', '=', 2).executeTakeFirst();
        const { payload } = await eventually(retry, 5000, 'the retry');
        const after = await counted();
        assert.ok(
          after - before >= storedRowBytes(Buffer.byteLength(payload), DELIVERY_ROW_OVERHEAD),
          `the budget counted ${after - before} bytes more once the retry was written, not its copy of ${Buffer.byteLength(payload)} bytes`,
        );
      } finally {
        await app.cleanup();
        await receiver.close();
      }
    });
  });
}

describe('storage budget: the WAL is within it (sqlite)', () => {
  it('database file and WAL together never pass the budget under sustained writes', async () => {
    const budgetMb = 4;
    const app = await startTestApp('sqlite', { STORAGE_BUDGET_MB: String(budgetMb) }, { start: true });
    const file = path.join(app.config.dataDir, 'mothership.db');
    const onDisk = () => statSync(file).size + (existsSync(`${file}-wal`) ? statSync(`${file}-wal`).size : 0);
    try {
      let largest = 0;
      // About three times the budget, as fast as the service takes it, four writers at once.
      const writer = async (w: number) => {
        for (let i = 0; i < 300; i++) {
          const send = () => app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { w, i, blob: 'x'.repeat(4_000) } });
          let response = await send();
          while (response.status === 503) response = await send();
          assert.equal(response.status, 202, JSON.stringify(response.body));
          largest = Math.max(largest, onDisk());
        }
      };
      await Promise.all([0, 1, 2, 3].map(writer));
      assert.ok(largest <= budgetMb * MB, `database and WAL reached ${(largest / MB).toFixed(2)} MiB on disk, over the ${budgetMb} MiB budget`);
    } finally {
      await app.cleanup();
    }
  });
});

describe('storage budget: the logs on disk are within it (postgres)', () => {
  // A private cluster: the give-back waits for any transaction id older than the delete in any
  // database of the cluster (reclaim), so the suite's other files would hold it at random.
  let cluster: Awaited<ReturnType<typeof startPostgres>>;
  before(async () => {
    cluster = await startPostgres();
  });
  after(async () => {
    await cluster.destroy();
  });

  it("the keeper's deletes give their space back: the logs' files never grow past the budget under sustained writes", async () => {
    const budgetMb = 2;
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: String(budgetMb) }, { start: true, cluster: cluster.url });
    const onDisk = async () => {
      const { rows } = await sql<{ bytes: string }>`
        select pg_total_relation_size('events') + pg_total_relation_size('webhook_deliveries') as bytes`.execute(app.database.db);
      return Number(rows[0]!.bytes);
    };
    try {
      const empty = await onDisk();
      let largest = 0;
      // About three times the budget, four writers at once. Random text: PostgreSQL compresses
      // nothing, so each row takes on disk what the budget counts.
      const writer = async (w: number) => {
        for (let i = 0; i < 150; i++) {
          const blob = randomBytes(3_000).toString('base64');
          const send = () => app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { w, i, blob } });
          let response = await send();
          while (response.status === 503) response = await send();
          assert.equal(response.status, 202, JSON.stringify(response.body));
          largest = Math.max(largest, (await onDisk()) - empty);
        }
      };
      await Promise.all([0, 1, 2, 3].map(writer));
      assert.ok(largest <= budgetMb * MB, `the logs grew ${(largest / MB).toFixed(2)} MiB on disk, over the ${budgetMb} MiB budget`);
    } finally {
      await app.cleanup();
    }
  });

  it('a transaction held open (a backup, a stuck session) delays the give-back, but never has events refused for good', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '1' }, { start: true, cluster: cluster.url });
    const backup = new pg.Client({ connectionString: app.config.databaseUrl! });
    try {
      await backup.connect();
      await backup.query('begin isolation level repeatable read');
      await backup.query('select count(*) from events'); // holds its snapshot, as pg_dump does
      for (let i = 0; i < 400; i++) {
        const send = () => app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { i, blob: randomBytes(3_000).toString('base64') } });
        const deadline = Date.now() + 10_000;
        let response = await send();
        while (response.status === 503 && Date.now() < deadline) response = await send();
        assert.equal(response.status, 202, `event ${i}: still ${response.status} after 10 s of retries`);
      }
    } finally {
      await backup.end();
      await app.cleanup();
    }
  });
});

describe('storage budget: review of the keeper on PostgreSQL (postgres)', () => {
  // A private cluster: the give-back waits for any transaction id older than the delete in any
  // database of the cluster (reclaim), so the suite's other files would hold it at random.
  let cluster: Awaited<ReturnType<typeof startPostgres>>;
  before(async () => {
    // Prepared transactions for the test of one holding the give-back.
    cluster = await startPostgres(['max_prepared_transactions=2']);
  });
  after(async () => {
    await cluster.destroy();
  });

  const logs = [EVENT_LOG, ...FINISHED_DELIVERY_LOGS];

  const givenBackAtNextPass = async (budget: StorageBudget, database: Database) => {
    await budget.keep();
    assert.equal(budget.used, await storageBytes(database), 'given back at the next pass');
  };

  /** `database` whose `write` runs `before` first: what another process does between the keeper's statements. */
  const beforeEachWrite = (database: Database, before: () => Promise<void>): Database =>
    Object.create(database, {
      write: {
        value: async <T>(work: (db: Database['db']) => Promise<T>) => {
          await before();
          return database.write(work);
        },
      },
    }) as Database;

  /** `count` events an hour apart, oldest first, each with a payload of `bytes`. */
  const oldEvents = (count: number, bytes: number) =>
    Array.from({ length: count }, (_, k) => ({ event_type: 'anomaly.detected', timestamp: hoursAgo(count - k), payload: 'x'.repeat(bytes) }));

  it('a VACUUM running in the same database (autovacuum, another instance) does not hold the give-back: its snapshot holds back no other vacuum', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    const vacuumer = new pg.Client({ connectionString: app.config.databaseUrl! });
    let vacuuming: Promise<unknown> | null = null;
    let vacuumPid: number | null = null;
    try {
      await vacuumer.connect();
      await vacuumer.query('create table vacuum_target as select g, md5(g::text) as t from generate_series(1, 50000) g');
      await vacuumer.query('delete from vacuum_target where g % 2 = 0');
      // Throttled as autovacuum is, so it runs long enough to be seen.
      await vacuumer.query('set vacuum_cost_delay = 100');
      await vacuumer.query('set vacuum_cost_limit = 1');
      const { pid } = (await vacuumer.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!;
      vacuumPid = pid;
      vacuuming = vacuumer.query('vacuum vacuum_target').catch(() => {});
      await eventually(
        async () =>
          (await sql<{ n: number }>`select count(*)::int as n from pg_stat_progress_vacuum where pid = ${pid}`.execute(app.database.db)).rows[0]!.n === 1,
        5000,
        'the throttled VACUUM to run',
      );
      // Deletes that commit after the VACUUM began: their space is what a pass gives back.
      await app.database.db.insertInto('events').values(oldEvents(10, 100)).execute();
      await app.database.db.deleteFrom('events').execute();
      const mark = await deletionMark(app.database);
      assert.equal(await reclaim(app.database, logs, [mark!]), mark);
    } finally {
      // Cancelled on every path: throttled, it would run for minutes.
      if (vacuumPid !== null) await sql`select pg_cancel_backend(${vacuumPid})`.execute(app.database.db);
      await vacuuming;
      await vacuumer.end();
      await app.cleanup();
    }
  });

  it('a VACUUM of the log itself that began before the delete holds the give-back: it cannot free those rows, and SKIP_LOCKED skips that log', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    const vacuumer = new pg.Client({ connectionString: app.config.databaseUrl! });
    let vacuuming: Promise<unknown> | null = null;
    let vacuumPid: number | null = null;
    try {
      await vacuumer.connect();
      await app.database.db.insertInto('events').values(oldEvents(2000, 1000)).execute();
      await vacuumer.query('set vacuum_cost_delay = 100');
      await vacuumer.query('set vacuum_cost_limit = 1');
      vacuumPid = (await vacuumer.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      vacuuming = vacuumer.query('vacuum events').catch(() => {});
      await eventually(
        async () =>
          (await sql<{ n: number }>`select count(*)::int as n from pg_stat_progress_vacuum where pid = ${vacuumPid}`.execute(app.database.db)).rows[0]!.n === 1,
        5000,
        'the throttled VACUUM of events to run',
      );
      await app.database.db.deleteFrom('events').where('seq', '<=', 500).execute();
      const mark = await deletionMark(app.database);
      assert.equal(await reclaim(app.database, logs, [mark!]), null, 'given back while a VACUUM of events that began before the delete held the log');
      await sql`select pg_cancel_backend(${vacuumPid})`.execute(app.database.db);
      await vacuuming;
      vacuumPid = null;
      // The cancelled backend answers before it drops its snapshot.
      await eventually(async () => (await reclaim(app.database, logs, [mark!])) === mark, 5000, 'given back once that VACUUM ended');
    } finally {
      // Cancelled on every path: throttled, it would run for minutes.
      if (vacuumPid !== null) await sql`select pg_cancel_backend(${vacuumPid})`.execute(app.database.db);
      await vacuuming;
      await vacuumer.end();
      await app.cleanup();
    }
  });

  it('a keeper whose chunk another instance deleted first goes on with the next, and abandons no waiting delivery', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    try {
      await app.database.db.insertInto('events').values(oldEvents(600, 1000)).execute();
      // Another instance's keeper deletes the same oldest chunk between this one's read and its delete.
      let raced = false;
      const racing = beforeEachWrite(app.database, async () => {
        if (raced) return;
        raced = true;
        assert.ok((await pruneOldest(app.database, logs, 100)).rows > 0);
      });
      let abandonAsked = 0;
      const used = await storageBytes(app.database);
      const budget = new StorageBudget(racing, used, logs, async () => {
        abandonAsked++;
        return 0;
      });
      await budget.keep();
      assert.ok(raced);
      assert.equal(abandonAsked, 0, 'pending deliveries abandoned while the event log still had old rows to delete');
      assert.ok((await storageBytes(app.database)) <= budgetLevels(used).low, 'down to 75 %');
    } finally {
      await app.cleanup();
    }
  });

  it('skips a row another transaction holds (the dispatcher marking an attempt retried) rather than wait and deadlock; waits for it only when nothing else is left', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    const dispatcher = new pg.Client({ connectionString: app.config.databaseUrl! });
    try {
      await app.database.db
        .insertInto('webhook_deliveries')
        .values(
          Array.from({ length: 10 }, (_, k) => ({
            webhook_id: `msg_${k}`,
            event_seq: null,
            event_type: 'anomaly.detected',
            url: 'http://127.0.0.1:9/hook',
            payload: '{}',
            attempt: 1,
            state: 'retry_scheduled',
            due_at: hoursAgo(10 - k),
            created_at: hoursAgo(10 - k),
          })),
        )
        .execute();
      const [held] = await app.database.db.selectFrom('webhook_deliveries').select('id').orderBy('id').limit(1).execute();
      await dispatcher.connect();
      await dispatcher.query('begin');
      await dispatcher.query(`update webhook_deliveries set state = 'retried' where id = $1`, [held!.id]);
      // Waiting for the held row fails here rather than hanging (the dispatcher's next statement could deadlock with it).
      const waited = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('the keeper waited for the held row')), 10_000).unref());
      const pruned = await Promise.race([pruneOldest(app.database, logs, 100), waited]);
      assert.equal(pruned.rows, 9, 'every row but the held one');
      await dispatcher.query('commit');
      // Held and alone: the keeper waits for it rather than find nothing (and abandon pending deliveries).
      await dispatcher.query('begin');
      await dispatcher.query(`update webhook_deliveries set error = 'held' where id = $1`, [held!.id]);
      const alone = pruneOldest(app.database, logs, 100);
      await eventually(
        async () =>
          (
            await sql<{ waiting: boolean }>`
              select exists (select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock') as waiting`.execute(
              app.database.db,
            )
          ).rows[0]!.waiting,
        10_000,
        'the keeper waiting for the held row',
      );
      await dispatcher.query('commit');
      assert.equal((await alone).rows, 1);
    } finally {
      await dispatcher.query('commit').catch(() => {});
      await dispatcher.end().catch(() => {});
      await app.cleanup();
    }
  });

  it('counts every byte a pass deleted as used until it is given back: a pass over 10 % of the budget, appends committed meanwhile', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    try {
      await app.database.db.insertInto('events').values(oldEvents(600, 1000)).execute();
      // Another process appends while the pass deletes.
      const appended = oldEvents(50, 1000);
      let appending = true;
      const busy = beforeEachWrite(app.database, async () => {
        if (appending) await app.database.db.insertInto('events').values(appended).execute();
        appending = false;
      });
      const used = await storageBytes(app.database);
      // At 90 % of this budget; the pass's chunk of 100 rows is 15 % of it.
      const budget = new StorageBudget(busy, used / 0.9, logs);
      assert.ok((await budget.keep()) > 0);
      assert.equal(budget.used, used + appended.length * storedRowBytes(1000), 'nothing is given back before the VACUUM');
      await givenBackAtNextPass(budget, app.database);
    } finally {
      await app.cleanup();
    }
  });

  const heldWriters = [
    // An append between two statements (or a psql session left open after an insert).
    { name: 'a writer idle in its transaction (an xid, no snapshot between statements)', held: 'session' },
    // Two-phase commit: it outlives its session, so no session shows it.
    { name: 'a prepared transaction (two-phase commit, no session)', held: 'prepared' },
    // Another application of a shared cluster: its transaction id is below every snapshot a session
    // of this database takes while it runs, so a VACUUM frees the rows only at a moment when no session
    // here is in a statement.
    { name: 'a writer in another database of the cluster', held: 'elsewhere' },
  ] as const;
  for (const { name, held } of heldWriters) {
    it(`${name} that began before the delete holds the give-back`, async () => {
      const elsewhere = held === 'elsewhere' ? await createPgDatabase(cluster.url) : null;
      const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
      const writer = new pg.Client({ connectionString: elsewhere?.url ?? app.config.databaseUrl! });
      try {
        await app.database.db.insertInto('events').values(oldEvents(300, 2000)).execute();
        const budget = new StorageBudget(app.database, (await storageBytes(app.database)) / 0.9, logs);
        await writer.connect();
        await writer.query('begin');
        if (elsewhere) await writer.query('select pg_current_xact_id()');
        else await writer.query(`insert into events (event_type, timestamp, payload) values ('anomaly.detected', $1, '{}')`, [hoursAgo(0)]);
        if (held === 'prepared') {
          await writer.query(`prepare transaction 'held'`);
          await writer.end();
        }
        assert.ok((await budget.keep()) > 0, 'the pass deletes');
        await budget.keep();
        assert.ok(budget.used > (await storageBytes(app.database)), 'counted as given back before PostgreSQL may reuse the space');
        await (held === 'prepared' ? sql`commit prepared 'held'`.execute(app.database.db) : writer.query('commit'));
        await givenBackAtNextPass(budget, app.database);
      } finally {
        await writer.end().catch(() => {});
        await app.cleanup();
        await elsewhere?.drop();
      }
    });
  }

  // A hot standby with hot_standby_feedback holds back the primary's VACUUM for its queries: through its
  // replication slot's xmin, or without a slot through its walsender's (a session of no database).
  for (const slot of ['mothership_standby', undefined]) {
    it(`a hot standby's query that began before the delete holds the give-back (hot_standby_feedback, ${slot ? 'a replication slot' : 'no slot'})`, async () => {
      const primary = await startPostgres();
      let standby: Awaited<ReturnType<typeof startPostgres>> | undefined;
      let app: TestApp | undefined;
      let reader: pg.Client | undefined;
      try {
        // As every test's service, not a superuser: PostgreSQL hides other roles' sessions' `backend_type` from it.
        const { url } = await createPgDatabase(primary.url);
        standby = await startPostgres(['hot_standby_feedback=on', 'wal_receiver_status_interval=1'], { port: primary.port, slot });
        const db = (app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0', DATABASE_URL: url })).database;
        const standbyHorizon = async () =>
          (
            await sql<{ xmin: string | null }>`
              select ${slot ? sql`(select xmin::text from pg_replication_slots)` : sql`(select backend_xmin::text from pg_stat_replication)`} as xmin`.execute(
              db.db,
            )
          ).rows[0]!.xmin;
        await db.db.insertInto('events').values(oldEvents(300, 2000)).execute();
        const budget = new StorageBudget(db, (await storageBytes(db)) / 0.9, logs);
        reader = new pg.Client({ connectionString: standby.url });
        await reader.connect();
        await reader.query('begin isolation level repeatable read');
        await reader.query('select 1');
        const held = await eventually(standbyHorizon, 10_000, "the standby's feedback");
        assert.ok((await budget.keep()) > 0, 'the pass deletes');
        await budget.keep();
        assert.ok(budget.used > (await storageBytes(db)), 'counted as given back while the standby could still read the rows');
        await reader.query('commit');
        await eventually(async () => (await standbyHorizon()) !== held, 10_000, "the standby's feedback after its query");
        await eventually(async () => (await budget.keep(), budget.used === (await storageBytes(db))), 10_000, 'given back');
      } finally {
        await reader?.end().catch(() => {});
        await app?.cleanup();
        await standby?.destroy();
        await primary.destroy();
      }
    });
  }

  it("gives back each pass's deletions on their own: a transaction that began between two passes holds only the later one's", async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    const sessions: pg.Client[] = [];
    /** A transaction whose snapshot stays open from now on (a backup's, a stuck session's). */
    const snapshotFromNow = async () => {
      const session = new pg.Client({ connectionString: app.config.databaseUrl! });
      sessions.push(session);
      await session.connect();
      await session.query('begin isolation level repeatable read');
      await session.query('select 1');
      return session;
    };
    try {
      await app.database.db.insertInto('events').values(oldEvents(600, 1000)).execute();
      const used = await storageBytes(app.database);
      const budget = new StorageBudget(app.database, used / 0.9, logs);
      const beforeBoth = await snapshotFromNow();
      assert.ok((await budget.keep()) > 0, 'the first pass deletes');
      const betweenPasses = await snapshotFromNow();
      await app.database.db.insertInto('events').values(oldEvents(150, 1000)).execute();
      assert.ok((await budget.keep()) > 0, 'the second pass deletes');
      await beforeBoth.query('commit');
      await budget.keep();
      assert.ok(budget.used > (await storageBytes(app.database)), "the second pass's deletions given back while a transaction that can see them is open");
      await betweenPasses.query('commit');
      await givenBackAtNextPass(budget, app.database);
    } finally {
      for (const session of sessions) await session.end().catch(() => {});
      await app.cleanup();
    }
  });

  it('refuses an event before its rows are written: a refused row would take its space as a dead row until a VACUUM', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    const onDisk = async () => {
      const { rows } = await sql<{ bytes: string }>`
        select pg_total_relation_size('events') + pg_total_relation_size('webhook_deliveries') as bytes`.execute(app.database.db);
      return Number(rows[0]!.bytes);
    };
    try {
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/hook' } })).status, 200);
      const budget = new StorageBudget(app.database, (await storageBytes(app.database)) + MB, logs);
      await budget.keep(); // measures
      const { events: log } = createEventPipeline(app.database, new SecretBox(app.config.secretsKey), [budget]);
      const before = await onDisk();
      // Each alone over the budget: refused however little the log holds.
      for (let i = 0; i < 20; i++) {
        const refusal = await log
          .emit('anomaly.detected', { detail: { i, blob: randomBytes(800_000).toString('base64') } })
          .catch((error: DomainError) => error);
        assert.equal((refusal as DomainError).code, 'storage_full');
      }
      assert.equal(await onDisk(), before, 'the refused events took space on disk');
    } finally {
      await app.cleanup();
    }
  });

  it('appends checked but waiting for their turn are not dropped by a measurement: the logs stay within the refusal level', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    const locker = new pg.Client({ connectionString: app.config.databaseUrl! });
    try {
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/hook' } })).status, 200);
      await app.database.db.insertInto('events').values(oldEvents(400, 1000)).execute();
      const budgetBytes = (await storageBytes(app.database)) / 0.8;
      const budget = new StorageBudget(app.database, budgetBytes, logs);
      await budget.keep(); // measures: 80 %, under `high`
      const { events: log } = createEventPipeline(app.database, new SecretBox(app.config.secretsKey), [budget]);
      // Each append (the event and its delivery's copy) about 3 % of the budget.
      const blob = 'y'.repeat(Math.round((budgetBytes * 0.03) / 2) - 300);
      await locker.connect();
      await locker.query('begin');
      await locker.query('select pg_advisory_xact_lock($1)', [EVENT_APPEND_LOCK]);
      const outcomes: Promise<string>[] = [];
      let settled = 0;
      const waiting = async () =>
        (
          await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event = 'advisory'`.execute(
            app.database.db,
          )
        ).rows[0]!.n;
      const wave = async () => {
        const [before, waitingBefore] = [settled, await waiting()];
        for (let i = 0; i < 6; i++)
          outcomes.push(
            log.emit('anomaly.detected', { detail: { blob } }).then(
              () => 'taken',
              (error: DomainError) => (settled++, error.code),
            ),
          );
        // Each of the six is refused or waits for its turn.
        await eventually(async () => settled - before + (await waiting()) - waitingBefore >= 6, 5000, 'the appends to be refused or wait');
      };
      await wave();
      await budget.keep(); // the keeper's periodic measurement, while those appends wait for their turn
      await wave();
      await locker.query('commit');
      const results = await Promise.all(outcomes);
      const used = await storageBytes(app.database);
      assert.ok(
        used <= budgetLevels(budgetBytes).refuse,
        `${results.filter((r) => r === 'taken').length} of 12 taken: the logs take ${((100 * used) / budgetBytes).toFixed(1)} % of the budget`,
      );
    } finally {
      await locker.end().catch(() => {});
      await app.cleanup();
    }
  });

  it('deletes nothing more for what waits to be given back: deleting cannot free it', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    const reader = new pg.Client({ connectionString: app.config.databaseUrl! });
    try {
      await app.database.db.insertInto('events').values(oldEvents(600, 1000)).execute();
      const budget = new StorageBudget(app.database, (await storageBytes(app.database)) / 0.9, logs);
      // A transaction open from before the delete holds the give-back (briefly, as an append in flight does).
      await reader.connect();
      await reader.query('begin isolation level repeatable read');
      await reader.query('select count(*) from events');
      assert.ok((await budget.keep()) > 0);
      const rows = await storageBytes(app.database);
      assert.equal(await budget.keep(), 0, "the second pass deleted more rows while the first pass's space waited to be given back");
      assert.equal(await storageBytes(app.database), rows);
    } finally {
      await reader.end();
      await app.cleanup();
    }
  });

  it('counts what a pass deleted as used during the pass too, and after a pass that failed midway', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    try {
      await app.database.db.insertInto('events').values(oldEvents(600, 1000)).execute();
      const used = await storageBytes(app.database);
      // The pass's second chunk: first seen before it is deleted, then failing.
      let writes = 0;
      let seenDuringPass = 0;
      const failing = beforeEachWrite(app.database, async () => {
        if (++writes !== 2) return;
        seenDuringPass = budget.used;
        throw new Error('Query read timeout');
      });
      const budget = new StorageBudget(failing, used / 0.95, logs);
      await assert.rejects(budget.keep());
      assert.ok((await storageBytes(app.database)) < used, 'the first chunk was deleted');
      assert.equal(seenDuringPass, used, 'during the pass, what it deleted counted as free before any VACUUM');
      assert.equal(budget.used, used, 'after the failed pass, what it deleted counted as free before any VACUUM');
      await givenBackAtNextPass(budget, app.database);
    } finally {
      await app.cleanup();
    }
  });

  it('a give-back that fails (the VACUUM timed out) does not stop the keeper from deleting', async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    try {
      await app.database.db.insertInto('events').values(oldEvents(300, 1000)).execute();
      const failingVacuum = Object.create(app.database, {
        db: {
          value: app.database.db.withPlugin({
            transformQuery: (args) => {
              const node = args.node as unknown as { kind: string; sqlFragments?: readonly string[] };
              if (node.kind === 'RawNode' && node.sqlFragments?.[0]?.trimStart().startsWith('vacuum')) throw new Error('Query read timeout');
              return args.node;
            },
            transformResult: async (args) => args.result,
          }),
        },
      }) as typeof app.database;
      const used = await storageBytes(app.database);
      const budget = new StorageBudget(failingVacuum, used * 1.5, logs);
      // A first pass over the budget leaves deleted rows to give back.
      await app.database.db.insertInto('events').values(oldEvents(300, 1000)).execute();
      assert.ok((await budget.keep()) > 0);
      // More rows arrive; the next pass's give-back fails: it still deletes.
      await app.database.db.insertInto('events').values(oldEvents(300, 1000)).execute();
      const before = await storageBytes(app.database);
      await budget.keep().catch(() => 0);
      assert.ok((await storageBytes(app.database)) < before, 'the pass deleted nothing once its VACUUM failed');
    } finally {
      await app.cleanup();
    }
  });

  // Open: the count misses a delivery row's other columns, its index entries, the versions its
  // updates leave, and the receiver's answer, written by an update the triggers do not count.
  it("counts at least what the delivery log's rows take on disk: small payloads, the receiver's answer, the indexes", async () => {
    const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { cluster: cluster.url });
    const db = app.database.db;
    const onDisk = async () => {
      const { rows } = await sql<{ bytes: string }>`
        select pg_total_relation_size('events') + pg_total_relation_size('webhook_deliveries') as bytes`.execute(db);
      return Number(rows[0]!.bytes);
    };
    try {
      const [disk0, counted0] = [await onDisk(), await storageBytes(app.database)];
      const rows = 3000;
      const payload = JSON.stringify({ event_type: 'zone.entered', timestamp: hoursAgo(0), person_id: 'resident', zone_id: 'kitchen' });
      for (let start = 0; start < rows; start += 500) {
        // As the outbox writes them: pending, then the attempt's outcome with the receiver's answer
        // (an error page from a proxy in front of the receiver).
        const inserted = await db
          .insertInto('webhook_deliveries')
          .values(
            Array.from({ length: 500 }, (_, k) => ({
              webhook_id: `msg_${randomBytes(12).toString('hex')}_${start + k}`,
              event_seq: start + k,
              event_type: 'zone.entered',
              url: 'https://hooks.example.com/mothership/ingest',
              payload,
              attempt: 1,
              state: 'pending' as const,
              due_at: hoursAgo(0),
              created_at: hoursAgo(0),
            })),
          )
          .returning('id')
          .execute();
        await db
          .updateTable('webhook_deliveries')
          .set({
            state: 'failed',
            status_code: 502,
            error: 'HTTP 502',
            duration_ms: 12,
            attempted_at: hoursAgo(0),
            response_body: randomBytes(3072).toString('base64'),
          })
          .where(
            'id',
            'in',
            inserted.map((row) => row.id),
          )
          .execute();
      }
      await sql`vacuum webhook_deliveries`.execute(db);
      const [disk, counted] = [(await onDisk()) - disk0, (await storageBytes(app.database)) - counted0];
      assert.ok(disk <= counted, `${rows} delivery rows take ${(disk / MB).toFixed(2)} MiB on disk, the budget counts ${(counted / MB).toFixed(2)} MiB`);
    } finally {
      await app.cleanup();
    }
  });
});

/** PostgreSQL: the triggers' count (every row of log_usage) is what the logs' rows take as stored. */
async function assertCountedAsStored(db: Kysely<any>): Promise<void> {
  const { rows } = await sql<{ counted: string; stored: string }>`
    select (select sum(bytes) from log_usage) as counted,
      (select sum(${sql.raw(STORED_ROW_BYTES_SQL)}) from events) + (select sum(${sql.raw(STORED_DELIVERY_BYTES_SQL)}) from webhook_deliveries) as stored`.execute(
    db,
  );
  assert.equal(Number(rows[0]!.counted), Number(rows[0]!.stored));
}

describe('storage budget: migration 023 beside 0.2.0 (postgres)', () => {
  it('an upgrade from 0.2.0 (021 to 023 in one transaction) while 0.2.0 appends: neither deadlocks, and the count is as stored', async () => {
    const { url, drop } = await createPgDatabase();
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 2 }) }) });
    const writer = new pg.Client({ connectionString: url });
    try {
      const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations('postgres') } });
      assert.equal((await migrator.migrateTo('019_mqtt_retained')).error, undefined);
      const delivery = `insert into webhook_deliveries (webhook_id, event_seq, event_type, url, payload, attempt, state, due_at, created_at)
        values ($1, null, 'anomaly.detected', 'http://127.0.0.1:9/hook', $2, 1, 'delivered', $3, $3)`;
      await writer.connect();
      for (let i = 0; i < 20; i++) {
        const big = randomBytes(3_000).toString('base64');
        await writer.query(`insert into events (event_type, timestamp, payload) values ('anomaly.detected', $1, $2)`, [hoursAgo(1), big]);
        await writer.query(delivery, [`msg_old_${i}`, big, hoursAgo(1)]);
      }
      // A 0.2.0 append in flight: its event written, its delivery next, in one transaction.
      await writer.query('begin');
      await writer.query(`insert into events (event_type, timestamp, payload) values ('anomaly.detected', $1, '{}')`, [hoursAgo(0)]);
      let done = false;
      const upgrade = migrator.migrateToLatest().finally(() => (done = true));
      await eventually(
        async () =>
          done ||
          (
            await sql<{
              waiting: boolean;
            }>`select exists (select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock') as waiting`.execute(db)
          ).rows[0]!.waiting,
        10_000,
        'the upgrade waiting or done',
      );
      await writer.query(delivery, ['msg_in_flight', '{}', hoursAgo(0)]);
      await writer.query('commit');
      assert.equal((await upgrade).error, undefined);
      await assertCountedAsStored(db);
    } finally {
      await writer.end().catch(() => {});
      await db.destroy();
      await drop();
    }
  });
});

describe('storage budget: the count spread over connections (postgres)', () => {
  it("a log's writers do not wait for each other's count: a transaction that wrote both logs and stays open holds no other writer, and the count is as stored", async () => {
    const { url, drop } = await createPgDatabase();
    const db = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
    const clients: pg.Client[] = [];
    const connect = async () => {
      const client = new pg.Client({ connectionString: url });
      clients.push(client);
      await client.connect();
      return client;
    };
    const shardOf = async (client: pg.Client) => Number((await client.query('select pg_backend_pid() as pid')).rows[0].pid) % USAGE_SHARDS;
    /** Every kind of write the triggers count: an event, a delivery, a receiver's answer, the keeper's deletes. */
    const writeBothLogs = async (client: pg.Client, name: string) => {
      await client.query(`insert into events (event_type, timestamp, payload) values ('anomaly.detected', $1, $2)`, [hoursAgo(0), 'x'.repeat(3_000)]);
      await client.query(
        `insert into webhook_deliveries (webhook_id, event_seq, event_type, url, payload, attempt, state, due_at, created_at)
          values ($1, null, 'anomaly.detected', 'http://127.0.0.1:9/hook', $2, 1, 'pending', $3, $3)`,
        [`msg_${name}`, 'y'.repeat(3_000), hoursAgo(0)],
      );
      await client.query(`update webhook_deliveries set state = 'failed', error = 'HTTP 500', response_body = $2 where webhook_id = $1`, [
        `msg_${name}`,
        'z'.repeat(500),
      ]);
      await client.query(`delete from events where seq = (select min(seq) from events)`);
      await client.query(`delete from webhook_deliveries where id = (select min(id) from webhook_deliveries)`);
    };
    try {
      assert.equal((await new Migrator({ db, provider: { getMigrations: async () => migrations('postgres') } }).migrateToLatest()).error, undefined);
      const holder = await connect();
      let writer = await connect();
      // Two connections share a row only when their pids do modulo USAGE_SHARDS.
      while ((await shardOf(writer)) === (await shardOf(holder))) writer = await connect();
      for (const name of ['seed_1', 'seed_2', 'seed_3', 'seed_4']) await writeBothLogs(writer, name);
      await holder.query('begin');
      await writeBothLogs(holder, 'held');
      // Waiting for the holder's row lock would fail here instead of hanging.
      await writer.query(`set statement_timeout = '10s'`);
      await writeBothLogs(writer, 'beside');
      await holder.query('commit');
      await assertCountedAsStored(db);
    } finally {
      for (const client of clients) await client.end().catch(() => {});
      await db.destroy();
      await drop();
    }
  });
});
