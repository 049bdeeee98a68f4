import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import pg from 'pg';
import { storageBytes } from '../src/db/index.js';
import { EVENT_APPEND_LOCK } from '../src/db/schema.js';
import { DIALECTS, eventually, lockWaiter, startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';
import { EventLog, type AppendHook } from '../src/events/index.js';
import { WebhookOutbox } from '../src/webhook/outbox.js';
import { LANES } from '../src/webhook/service.js';

const MB = 2 ** 20;
const blob = 'x'.repeat(4_000); // within the 4096 bytes an anomaly's detail may take

const deliveries = (app: TestApp): Promise<{ id: number; event_type: string; state: string; error: string | null; payload: string }[]> =>
  app.database.db.selectFrom('webhook_deliveries').select(['id', 'event_type', 'state', 'error', 'payload']).orderBy('id').execute();
const abandonedMetric = async (app: TestApp) => {
  const text = String((await app.api('GET', '/metrics')).body);
  return Number(/^mothership_webhook_deliveries_total\{outcome="abandoned"\} (\d+)/m.exec(text)?.[1] ?? 0);
};

/** Watches the app's warn lines that start with `prefix`. */
function warnings(app: TestApp, prefix: string): string[] {
  const seen: string[] = [];
  const warn = app.http.log.warn.bind(app.http.log);
  app.http.log.warn = ((fields: object, message?: string) => {
    if (message?.startsWith(prefix)) seen.push(message);
    warn(fields, message);
  }) as typeof app.http.log.warn;
  return seen;
}

for (const dialect of DIALECTS) {
  describe(`webhook outbox bound: WEBHOOK_PENDING_MAX (${dialect})`, () => {
    let app: TestApp;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    let abandonedLines: string[];

    before(async () => {
      receiver = await startReceiver('hang');
      app = await startTestApp(dialect, { STORAGE_BUDGET_MB: '0', WEBHOOK_PENDING_MAX: '20', WEBHOOK_TIMEOUT_MS: '600000' });
      abandonedLines = warnings(app, 'webhook: pending deliveries abandoned');
      await app.start();
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
    });
    after(async () => {
      await app.cleanup();
      await receiver.close();
    });

    it('abandons the oldest pending deliveries beyond the cap, falls last, with a metric and one log line', async () => {
      // The first deliveries hang at the receiver and fill the first-attempt lane's slots: the rest wait.
      const { concurrency } = LANES.find((lane) => lane.name === 'first')!;
      for (let i = 0; i < concurrency; i++)
        assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { i: -1 - i } })).status, 202);
      await eventually(() => receiver.received.length === concurrency, 5000, 'the first deliveries reach the receiver');
      assert.equal((await app.api('POST', '/api/events', { type: 'fall.detected' })).status, 202);
      for (let i = 0; i < 60; i++) assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { i } })).status, 202);

      await eventually(
        async () => (await deliveries(app)).filter((row) => row.state === 'pending').length <= 20,
        5000,
        'the pending deliveries are cut back to WEBHOOK_PENDING_MAX',
      );
      const rows = await deliveries(app);
      const pending = rows.filter((row) => row.state === 'pending');
      const abandoned = rows.filter((row) => row.state === 'abandoned');
      assert.equal(pending.length, 20);
      assert.ok(
        pending.some((row) => row.event_type === 'fall.detected'),
        'the fall is still pending: low-value deliveries go first',
      );
      assert.ok(abandoned.length >= 41, `${abandoned.length} abandoned`);
      assert.ok(
        abandoned.every((row) => row.event_type === 'anomaly.detected'),
        'only anomalies abandoned',
      );
      const pendingAnomalies = pending.filter((row) => row.event_type === 'anomaly.detected');
      assert.ok(Math.max(...abandoned.map((row) => row.id)) < Math.min(...pendingAnomalies.map((row) => row.id)), 'the oldest go first');
      assert.match(abandoned[0]!.error ?? '', /WEBHOOK_PENDING_MAX/);
      assert.ok(abandoned[0]!.payload.length > 0, 'an abandoned delivery keeps its body: it can be redelivered');
      assert.equal(await abandonedMetric(app), abandoned.length);
      assert.equal(abandonedLines.length, 1, 'one line for the lot');

      const listed = await app.api('GET', '/api/webhook/deliveries?state=abandoned&limit=100');
      assert.equal(listed.status, 200, JSON.stringify(listed.body));
      assert.equal(listed.body.length, abandoned.length);
    });
  });

  describe(`webhook outbox bound: a receiver that hangs cannot fill the storage budget (${dialect})`, () => {
    it('a fall event is taken, and the database stays within the budget', async () => {
      const receiver = await startReceiver('hang');
      const app = await startTestApp(dialect, { STORAGE_BUDGET_MB: '1', WEBHOOK_TIMEOUT_MS: '600000' });
      try {
        await app.start();
        assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
        let largest = 0;
        // 400 events of 4 KB, each with its pending delivery: three times the budget.
        for (let i = 0; i < 400; i++) {
          // On PostgreSQL another test's transaction in the cluster may hold the give-back: events are
          // then refused until the keeper counts it as held (GIVE_BACK_HELD_MS) and deletes for it.
          const deadline = Date.now() + 10_000;
          let response = await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { i, blob } });
          while (response.status === 503 && Date.now() < deadline) {
            assert.equal(response.body.code, 'storage_full');
            await new Promise((resolve) => setTimeout(resolve, 20));
            response = await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { i, blob } });
          }
          assert.equal(response.status, 202, `event ${i}: ${JSON.stringify(response.body)}`);
          largest = Math.max(largest, await storageBytes(app.database));
        }
        const fall = await eventually(
          async () => {
            const response = await app.api('POST', '/api/events', { type: 'fall.detected' });
            return response.status === 202;
          },
          5000,
          'a fall event is taken',
        );
        assert.ok(fall);
        assert.ok(largest <= MB, `the database reached ${(largest / MB).toFixed(2)} MiB, over the 1 MiB budget`);
        const rows = await deliveries(app);
        assert.ok(
          rows.some((row) => row.event_type === 'fall.detected' && row.state === 'pending'),
          'the fall is waiting for the receiver',
        );
        assert.ok(await abandonedMetric(app), 'pending deliveries were abandoned to make room');
      } finally {
        await app.cleanup();
        await receiver.close();
      }
    });
  });
}

describe('webhook outbox: an event that waited for its turn while the webhook was enabled, committed after, gets its delivery (postgres)', () => {
  const url = 'http://127.0.0.1:9/hook';
  const cases = [
    // Not started: no view of the settings, so the append reads the row under the append lock.
    { name: 'the row read under the lock', start: false, before: null },
    // A stored row the instance's view is of: the append's own statement checks it, locking the row after the lock.
    { name: "this instance's view checked in the append's statement", start: true, before: { enabled: false, url } },
  ];
  for (const { name, start, before } of cases) {
    it(name, async () => {
      const app = await startTestApp('postgres', { STORAGE_BUDGET_MB: '0' }, { start });
      const locker = new pg.Client({ connectionString: app.config.databaseUrl! });
      try {
        if (before) assert.equal((await app.api('POST', '/api/settings/integration', { webhook: before })).status, 200);
        await locker.connect();
        // Another append holds the append lock (a slow commit ahead of this one).
        await locker.query('begin');
        await locker.query('select pg_advisory_xact_lock($1)', [EVENT_APPEND_LOCK]);
        const event = app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { n: 1 } });
        await lockWaiter(app, 'the append to wait for its turn');
        assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url } })).status, 200);
        await locker.query('commit');
        assert.equal((await event).status, 202);
        assert.equal((await deliveries(app)).length, 1, 'the event committed after the save that enabled the webhook, without its delivery');
      } finally {
        await locker.end().catch(() => {});
        await app.cleanup();
      }
    });
  }
});

describe("webhook outbox: this instance's view of the target holds only while the row is the one it read (postgres)", () => {
  it('an event goes where the stored row says, when another instance rewrote it keeping its time (two saves in one millisecond)', async () => {
    const app = await startTestApp('postgres', {}, { start: true });
    const firstAttempts = async () =>
      (await app.database.db.selectFrom('webhook_deliveries').select(['url', 'event_type']).where('attempt', '=', 1).orderBy('id').execute()).map(
        (row) => `${row.event_type} ${row.url}`,
      );
    const rewrite = (from: string, to: string) =>
      sql`update settings set value = replace(value, ${from}, ${to}) where key = 'integration'`.execute(app.database.db);
    try {
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/old' } })).status, 200);
      assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { n: 1 } })).status, 202);
      await rewrite('http://127.0.0.1:9/old', 'http://127.0.0.1:9/new');
      assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { n: 2 } })).status, 202);
      await rewrite('"enabled":true', '"enabled":false');
      assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { n: 3 } })).status, 202);
      assert.deepEqual(await firstAttempts(), ['anomaly.detected http://127.0.0.1:9/old', 'anomaly.detected http://127.0.0.1:9/new']);
    } finally {
      await app.cleanup();
    }
  });
});

describe('webhook outbox: the dispatcher is woken for what an append inserted (postgres)', () => {
  it('also when another append of this instance published while this one waited for its turn', async () => {
    const app = await startTestApp('postgres', {}, { start: true });
    try {
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/hook' } })).status, 200);
      const outbox = new WebhookOutbox(app.database, app.settings);
      // After the outbox's prepare and before the append's statement, another append publishes: its
      // dispatcher takes the flag, and finds nothing of this append, which has not committed.
      const publishedMeanwhile: AppendHook = { prepare: async () => void outbox.takeEnqueued() };
      await new EventLog(app.database, [outbox, publishedMeanwhile]).emit('anomaly.detected', { detail: { n: 1 } });
      assert.equal((await deliveries(app)).length, 1);
      assert.equal(outbox.takeEnqueued(), true, 'the delivery waits for the next poll');
    } finally {
      await app.cleanup();
    }
  });
});
