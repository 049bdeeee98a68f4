import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import type { ServerResponse } from 'node:http';
import { CompiledQuery, sql } from 'kysely';
import { deliveryLogQuery, dueDeliveries } from '../src/webhook/service.js';
import { DIALECTS, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { startReceiver } from './helpers/receiver.js';

const BACKLOG = 5000;

for (const dialect of DIALECTS) {
  describe(`webhook backlog (${dialect})`, () => {
    let app: TestApp;
    let receiver: Awaited<ReturnType<typeof startReceiver>>;
    const failing = new Set<string>();
    /** Answers the receiver holds back (the slow receiver's), ended when the file's tests end. */
    const held: ServerResponse[] = [];

    before(async () => {
      // The receiver fails the backlog's deliveries, holds back its answer to an event marked slow and
      // takes the others: one URL, answered by webhook-id and body.
      receiver = await startReceiver((response) => {
        const { headers, body } = receiver.received.at(-1)!;
        if (body.includes('"slow":true')) held.push(response);
        else response.writeHead(failing.has(String(headers['webhook-id'])) ? 500 : 200).end();
      });
      // Its setup writes 100,000 deliveries in one statement: longer than a request's query may take.
      app = await startTestApp(dialect, { WEBHOOK_RETRY_DELAY_MS: '60000', DATABASE_TIMEOUT_MS: '120000' }, { start: true });
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: receiver.url } })).status, 200);
    });
    after(async () => {
      for (const response of held) response.end();
      await app.cleanup();
      await receiver.close();
    });

    it('a new event gets its first attempt within 2 s, whatever retries are due before it', async () => {
      const due = new Date(Date.now() - 1000).toISOString();
      const rows = Array.from({ length: BACKLOG }, (_, i) => {
        const webhookId = `msg_backlog_${i}`;
        failing.add(webhookId);
        return {
          webhook_id: webhookId,
          event_seq: null,
          event_type: 'anomaly.detected',
          url: receiver.url,
          payload: '{"event_type":"anomaly.detected"}',
          attempt: 2,
          state: 'pending' as const,
          due_at: due,
          created_at: due,
        };
      });
      for (let start = 0; start < rows.length; start += 500)
        await app.database.db
          .insertInto('webhook_deliveries')
          .values(rows.slice(start, start + 500))
          .execute();
      app.webhook.kick();
      await eventually(() => receiver.received.length >= 50, 10_000, 'the backlog being worked on');

      const sentAt = Date.now();
      assert.equal((await app.api('PUT', '/api/system/mode', { mode: 'away' })).status, 200);
      const first = await eventually(
        () => receiver.received.find((request) => request.headers['x-service-event'] === 'system.mode_changed'),
        10_000,
        'the new event',
      );
      const waitedMs = first.at - sentAt;
      assert.ok(waitedMs < 2000, `the new event waited ${waitedMs} ms behind ${BACKLOG} due retries`);
      const backlogSent = receiver.received.filter((request) => failing.has(String(request.headers['webhook-id']))).length;
      assert.ok(backlogSent < BACKLOG, 'the backlog was still being worked on when the new event went out');
    });

    it('a receiver slow to answer one delivery holds back none of the deliveries after it', async () => {
      // An automation that takes its time over one event: its answer comes after the next events' (the
      // timeout is WEBHOOK_TIMEOUT_MS, 15 s here).
      assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { slow: true } })).status, 202);
      await eventually(() => held.length === 1, 10_000, 'the slow delivery sent');
      const sentAt = Date.now();
      for (let n = 0; n < 20; n++) assert.equal((await app.api('POST', '/api/events', { type: 'anomaly.detected', detail: { n } })).status, 202);
      const after = () => receiver.received.filter((request) => request.at >= sentAt && request.body.includes('"n":'));
      await eventually(() => after().length === 20, 10_000, 'the 20 events after the slow one');
      const waitedMs = Math.max(...after().map((request) => request.at)) - sentAt;
      assert.ok(waitedMs < 5000, `the events after the slow one arrived ${waitedMs} ms after they were sent`);
      assert.equal(held.length, 1, 'the slow delivery still waits for its answer');
    });

    it('finds the due retries through an index that stops at the first one not due, whatever waits behind it', async () => {
      const later = new Date(Date.now() + 3600_000).toISOString();
      for (const lane of ['first', 'retry'] as const) {
        const query = dueDeliveries(lane)(app.database.db, (name) => ({ state: 'pending', at: later })[name])
          .limit(50)
          .compile();
        const explain = dialect === 'postgres' ? 'explain ' : 'explain query plan ';
        const { rows } = await app.database.db.executeQuery(CompiledQuery.raw(explain + query.sql, [...query.parameters]));
        const plan = rows.map((row) => Object.values(row as object).join(' ')).join('\n');
        if (dialect === 'postgres') {
          assert.doesNotMatch(plan, /Seq Scan|Sort/, `${lane}: ${plan}`);
          assert.match(plan, /Index Cond: .*due_at <=/, `${lane}: ${plan}`);
        } else {
          assert.doesNotMatch(plan, /SCAN webhook_deliveries(?! USING)|USE TEMP B-TREE/, `${lane}: ${plan}`);
          assert.match(plan, /USING (COVERING )?INDEX \w+ \(state=\? AND attempt=\? AND due_at<\?\)/, `${lane}: ${plan}`);
        }
      }
    });

    it('filters the delivery log through an index, never a scan of the log', async () => {
      // The query plans at 100,000 rows (timings are in bench/README.md).
      const target = 100_000;
      const have = Number(
        (
          await app.database.db
            .selectFrom('webhook_deliveries')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
      const types = ['anomaly.detected', 'fall.detected', 'presence.changed', 'zone.entry'];
      if (dialect === 'postgres') {
        await sql`insert into webhook_deliveries (webhook_id, event_type, url, payload, attempt, state, due_at, created_at)
          select 'msg_' || g, (array['anomaly.detected','presence.changed','zone.entry'])[1 + g % 3], 'http://127.0.0.1:9/hook', '{}', 1,
            (array['delivered','failed'])[1 + g % 2], '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'
          from generate_series(1, ${target - have}) g`.execute(app.database.db);
        await sql`analyze webhook_deliveries`.execute(app.database.db);
      } else {
        await sql`with recursive g(n) as (select 1 union all select n + 1 from g where n < ${target - have})
          insert into webhook_deliveries (webhook_id, event_type, url, payload, attempt, state, due_at, created_at)
          select 'msg_' || n, case n % 3 when 0 then 'anomaly.detected' when 1 then 'presence.changed' else 'zone.entry' end, 'http://127.0.0.1:9/hook', '{}', 1,
            case n % 2 when 0 then 'delivered' else 'failed' end, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z' from g`.execute(app.database.db);
        await sql`analyze`.execute(app.database.db);
      }
      const filters = [{ event_type: types[1] }, { event_type: types[0] }, { state: 'delivered' as const }, { state: 'failed' as const, event_type: types[1] }];
      for (const filter of filters) {
        const query = deliveryLogQuery(app.database.db, { limit: 50, ...filter }).compile();
        const explain = dialect === 'postgres' ? 'explain ' : 'explain query plan ';
        const { rows } = await app.database.db.executeQuery(CompiledQuery.raw(explain + query.sql, [...query.parameters]));
        const plan = rows.map((row) => Object.values(row as object).join(' ')).join('\n');
        if (dialect === 'postgres') {
          assert.doesNotMatch(plan, /Seq Scan|Sort/, `${JSON.stringify(filter)}: ${plan}`);
          assert.match(plan, /Index Scan/, `${JSON.stringify(filter)}: ${plan}`);
        } else {
          assert.doesNotMatch(plan, /SCAN webhook_deliveries(?! USING)|USE TEMP B-TREE/, `${JSON.stringify(filter)}: ${plan}`);
          assert.match(plan, /SEARCH webhook_deliveries USING INDEX/, `${JSON.stringify(filter)}: ${plan}`);
        }
      }
      const response = await app.api('GET', `/api/webhook/deliveries?event_type=${types[1]}&state=failed&limit=5`);
      assert.equal(response.status, 200);
    });
  });
}
