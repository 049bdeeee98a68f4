import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { pruneOlderThan } from '../src/db/prune.js';
import { applyRetention, retentionCutoff } from '../src/ops/retention.js';
import type { WebhookDeliveriesTable } from '../src/db/schema.js';
import { DIALECTS, eventually, startTestApp, type TestApp } from './helpers/app.js';
import { botRequest } from './helpers/bot.js';

const DAY_MS = 24 * 60 * 60 * 1000;
const daysAgo = (days: number) => new Date(Date.now() - days * DAY_MS).toISOString();

describe('retention schedule', () => {
  it('cuts off whole days before now, and keeps everything at 0 days', async () => {
    const nowMs = Date.parse('2026-11-22T12:00:00.000Z');
    assert.equal(retentionCutoff(nowMs, 30), '2026-10-23T12:00:00.000Z');
    assert.equal(retentionCutoff(nowMs, 0), null);
    const asked: string[] = [];
    const deleted = await applyRetention(
      [
        { name: 'kept', days: 0, prune: async () => assert.fail('a log kept forever is never pruned') },
        { name: 'events', days: 1, prune: async (cutoff) => (asked.push(cutoff), 7) },
      ],
      nowMs,
    );
    assert.deepEqual(deleted, { events: 7 });
    assert.deepEqual(asked, ['2026-11-21T12:00:00.000Z']);
  });
});

for (const dialect of DIALECTS) {
  describe(`retention (${dialect})`, () => {
    let app: TestApp;
    before(async () => (app = await startTestApp(dialect)));
    after(() => app.cleanup());

    const addEvents = (timestamps: string[]) =>
      app.database.db
        .insertInto('events')
        .values(
          timestamps.map((timestamp) => ({
            event_type: 'anomaly.detected',
            timestamp,
            payload: JSON.stringify({ event_type: 'anomaly.detected', timestamp }),
          })),
        )
        .execute();
    const eventTimes = async () => (await app.database.db.selectFrom('events').select('timestamp').orderBy('seq').execute()).map((row) => row.timestamp);

    it('deletes expired events oldest first, chunk after chunk, and keeps the rest', async () => {
      const old = daysAgo(40);
      for (let start = 0; start < 2500; start += 500) await addEvents(Array.from({ length: 500 }, () => old));
      // One written out of order (a later key with an earlier time) among young ones; and a young one
      // among the old: neither order misleads the pruning.
      const young = daysAgo(1);
      await addEvents([young, old, young]);
      assert.equal(await app.events.prune(daysAgo(30)), 2501);
      assert.deepEqual(await eventTimes(), [young, young]);
      assert.equal(await app.events.prune(daysAgo(30)), 0);
      const history = await app.api('GET', '/api/events?after=0');
      assert.equal(history.status, 200);
      assert.equal(history.body.events.length, 2);
    });

    it('stops at the first chunk that is not wholly expired', async () => {
      await app.database.db.deleteFrom('events').execute();
      const [old, young] = [daysAgo(40), daysAgo(1)];
      await addEvents([...Array.from({ length: 5 }, () => old), young, ...Array.from({ length: 5 }, () => old)]);
      // Chunks of 5: the first is all expired; the second holds the young event, so pruning ends with
      // it, leaving the last old one for the next pass.
      assert.equal(await pruneOlderThan(app.database, { table: 'events', key: 'seq', time: 'timestamp' }, daysAgo(30), 5), 9);
      assert.deepEqual(await eventTimes(), [young, old]);
      assert.equal(await pruneOlderThan(app.database, { table: 'events', key: 'seq', time: 'timestamp' }, daysAgo(30), 5), 1);
    });

    it('walks past rows stamped in the future (written while the clock ran ahead): the expired rows after them still go', async () => {
      await app.database.db.deleteFrom('events').execute();
      const [old, young, ahead] = [daysAgo(40), daysAgo(1), daysAgo(-365)];
      await addEvents([...Array.from({ length: 7 }, () => ahead), ...Array.from({ length: 6 }, () => old), young, ...Array.from({ length: 5 }, () => old)]);
      // Chunks of 5: two hold only rows stamped ahead or expired; the third holds the young one, so the
      // walk ends with it, leaving the last four old ones for the next pass.
      assert.equal(await pruneOlderThan(app.database, { table: 'events', key: 'seq', time: 'timestamp' }, daysAgo(30), 5), 7);
      assert.deepEqual(await eventTimes(), [...Array.from({ length: 7 }, () => ahead), young, ...Array.from({ length: 4 }, () => old)]);
    });

    it('deletes finished webhook attempts only: one still pending or sending is kept whatever its age', async () => {
      const states: WebhookDeliveriesTable['state'][] = ['delivered', 'failed', 'retry_scheduled', 'pending', 'sending'];
      const row = (state: WebhookDeliveriesTable['state'], createdAt: string) => ({
        webhook_id: `msg_${state}_${createdAt}`,
        event_seq: null,
        event_type: 'anomaly.detected',
        url: 'http://127.0.0.1:9/hook',
        payload: '{}',
        attempt: 1,
        state,
        due_at: createdAt,
        status_code: null,
        error: null,
        duration_ms: null,
        created_at: createdAt,
        attempted_at: null,
      });
      const [old, young] = [daysAgo(40), daysAgo(1)];
      await app.database.db
        .insertInto('webhook_deliveries')
        .values([...states.map((state) => row(state, old)), ...states.map((state) => row(state, young))])
        .execute();
      assert.equal(await app.webhook.prune(daysAgo(30)), 3);
      const left = await app.database.db.selectFrom('webhook_deliveries').select(['state', 'created_at']).orderBy('id').execute();
      assert.deepEqual(left, [
        { state: 'pending', created_at: old },
        { state: 'sending', created_at: old },
        ...states.map((state) => ({ state, created_at: young })),
      ]);
    });

    it('deletes finished enrichments (match and job) after their retention, never a job the quota counts or one still pending', async () => {
      const bot = (await app.api('POST', '/api/bots', { name: 'retained' })).body;
      const replay = { players: ['a', 'b'] };
      const request = (matchId: string) => botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: matchId });
      for (let i = 1; i <= 5; i++) {
        assert.equal((await app.api('POST', '/api/matches', { id: `rm${i}`, status: 'completed', replay })).status, 201);
        assert.equal((await request(`rm${i}`)).status, 202);
      }
      for (const [id, status] of [
        ['unasked-old', 'completed'],
        ['cancelled-old', 'cancelled'],
        ['scheduled-old', 'scheduled'],
        ['unasked-young', 'completed'],
      ] as const)
        assert.equal((await app.api('POST', '/api/matches', { id, status, replay })).status, 201);
      const db = app.database.db;
      await db
        .updateTable('matches')
        .set({ created_at: daysAgo(100) })
        .where('id', 'like', '%-old')
        .execute();
      // rm1 and rm2 finished long ago and left the quota window; rm3 finished long ago too by its
      // finish time, yet was enqueued inside the window (moved behind the service's back): the quota
      // still counts it. rm4 is still queued, enqueued long ago; rm5 finished yesterday.
      const finish = (matchId: string, state: 'completed' | 'failed', finishedAt: string, enqueuedAt: string) =>
        db
          .updateTable('enrichment_jobs')
          .set({ state, finished_at: finishedAt, enqueued_at: enqueuedAt, started_at: enqueuedAt })
          .where('match_id', '=', matchId)
          .execute();
      await finish('rm1', 'completed', daysAgo(100), daysAgo(100));
      await finish('rm2', 'failed', daysAgo(95), daysAgo(95));
      await finish('rm3', 'completed', daysAgo(100), daysAgo(0.5));
      await db
        .updateTable('enrichment_jobs')
        .set({ enqueued_at: daysAgo(100) })
        .where('match_id', '=', 'rm4')
        .execute();
      await finish('rm5', 'completed', daysAgo(1), daysAgo(1.5));
      await db.updateTable('matches').set({ enrichment_status: 'completed' }).where('id', 'in', ['rm1', 'rm3', 'rm5']).execute();

      assert.equal(await app.enrichment.prune(daysAgo(90)), 6, 'two jobs with their matches, two matches never requested');
      const matches = (await db.selectFrom('matches').select('id').orderBy('id').execute()).map((row) => row.id);
      assert.deepEqual(matches, ['rm3', 'rm4', 'rm5', 'scheduled-old', 'unasked-young']);
      const jobs = (await db.selectFrom('enrichment_jobs').select('match_id').orderBy('match_id').execute()).map((row) => row.match_id);
      assert.deepEqual(jobs, ['rm3', 'rm4', 'rm5']);

      // Two jobs (rm3, rm5) are in the window again, as the database counts: retention kept them.
      app.enrichment.requests.forgetQuotas();
      await db
        .updateTable('enrichment_jobs')
        .set({ enqueued_at: daysAgo(0.4) })
        .where('match_id', '=', 'rm4')
        .execute();
      for (let i = 6; i <= 8; i++) {
        assert.equal((await app.api('POST', '/api/matches', { id: `rm${i}`, status: 'completed', replay })).status, 201);
        assert.equal((await request(`rm${i}`)).status, 202, `rm${i}`);
      }
      await app.enrichment.prune(daysAgo(90));
      app.enrichment.requests.forgetQuotas();
      assert.equal((await app.api('POST', '/api/matches', { id: 'rm9', status: 'completed', replay })).status, 201);
      const refused = await request('rm9');
      assert.equal(refused.status, 429, 'the bot has 5 jobs in the window (rm3, rm4, rm6 to rm8): still refused after retention');
      // Idempotency: a kept match answers its job; a deleted one no longer exists.
      app.enrichment.requests.forgetQuotas();
      await db
        .updateTable('enrichment_jobs')
        .set({ enqueued_at: daysAgo(2) })
        .where('match_id', '=', 'rm8')
        .execute();
      const repeat = await request('rm3');
      assert.equal(repeat.status, 202);
      assert.equal(repeat.body.duplicate, true);
      assert.equal((await request('rm1')).status, 404);
    });

    it('prunes at start-up', async () => {
      const service = await startTestApp(dialect, { EVENT_RETENTION_DAYS: '7' }, { start: false });
      try {
        await service.database.db
          .insertInto('events')
          .values([8, 6].map((days) => ({ event_type: 'anomaly.detected', timestamp: daysAgo(days), payload: '{}' })))
          .execute();
        await service.start();
        await eventually(async () => (await service.database.db.selectFrom('events').select('seq').execute()).length === 1, 5000, 'the 8-day-old event pruned');
      } finally {
        await service.cleanup();
      }
    });
  });
}
