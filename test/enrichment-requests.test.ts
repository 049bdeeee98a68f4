import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import type { StoredEvent } from '../src/events/index.js';
import { DIALECTS, startTestApp, type TestApp } from './helpers/app.js';
import { botRequest } from './helpers/bot.js';
import { REPLAY } from './helpers/fixtures.js';
import { DAILY_QUOTA } from '../src/enrichment/quota.js';

type Bot = { id: string; shared_secret: string };

/** The enrichment request's one transaction, on both databases, under concurrent requests. */
for (const dialect of DIALECTS) {
  describe(`enrichment requests at once (${dialect})`, () => {
    let app: TestApp;
    let matchCount = 0;
    const newBot = async (id: string): Promise<Bot> => (await app.api('POST', '/api/bots', { id, name: id })).body;
    const newMatches = async (count: number) => {
      const ids: string[] = [];
      for (let i = 0; i < count; i++) {
        const id = `bm-${++matchCount}`;
        await app.api('POST', '/api/matches', { id, status: 'completed', replay: REPLAY });
        ids.push(id);
      }
      return ids;
    };
    const send = (bot: Bot, matchId: string, nonce?: string) =>
      botRequest(app.http, bot, 'POST', '/api/request-enrichment', { match_id: matchId }, nonce ? { nonce } : {});
    const jobsOf = async (bot: Bot) =>
      (await app.database.db.selectFrom('enrichment_jobs').select('match_id').where('bot_id', '=', bot.id).orderBy('id').execute()).map((job) => job.match_id);

    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.cleanup());

    it('DAILY_QUOTA + 3 requests of one bot at once: exactly DAILY_QUOTA accepted, each with its own quota left, the rest 429 quota_exceeded', async () => {
      const bot = await newBot('quota-at-once');
      const refused = 3;
      const responses = await Promise.all((await newMatches(DAILY_QUOTA + refused)).map((id) => send(bot, id)));
      const statuses = responses.map((response) => response.status).sort();
      assert.deepEqual(statuses, [...Array(DAILY_QUOTA).fill(202), ...Array(refused).fill(429)]);
      for (const response of responses.filter((r) => r.status === 429)) assert.equal(response.body.code, 'quota_exceeded');
      // The accepted ones see DAILY_QUOTA - 1 down to 0 left; the refused ones 0.
      const left = responses.map((response) => Number(/"daily";r=(\d+)/.exec(String(response.headers.ratelimit))?.[1])).sort((a, b) => a - b);
      assert.deepEqual(left, [...Array(refused).fill(0), ...Array.from({ length: DAILY_QUOTA }, (_, i) => i)]);
      assert.equal((await jobsOf(bot)).length, DAILY_QUOTA);
    });

    it('two bots requesting the same match at once: one queued, one duplicate of the same job that costs nothing', async () => {
      const [first, second] = [await newBot('dup-a'), await newBot('dup-b')];
      const [match] = await newMatches(1);
      const result = await Promise.all([send(first, match!), send(second, match!)]);
      assert.deepEqual(result.map((response) => [response.status, response.body.status]).sort(), [
        [202, 'queued'],
        [202, 'queued'],
      ]);
      assert.deepEqual(result.map((response) => response.body.duplicate).sort(), [false, true]);
      assert.equal(result[0]!.body.job_id, result[1]!.body.job_id);
      const duplicate = result.find((response) => response.body.duplicate)!;
      assert.match(String(duplicate.headers.ratelimit), new RegExp(`"daily";r=${DAILY_QUOTA};`), 'a duplicate costs its bot nothing');
    });

    it('the same nonce twice at once: one accepted, one 401, one nonce row, the refused request wrote nothing', async () => {
      const bot = await newBot('nonce-at-once');
      const matches = await newMatches(2);
      const nonce = 'same-nonce-at-once';
      const result = await Promise.all(matches.map((id) => send(bot, id, nonce)));
      assert.deepEqual(result.map((response) => response.status).sort(), [202, 401]);
      const accepted = result.find((response) => response.status === 202)!;
      assert.deepEqual(await jobsOf(bot), [accepted.body.match_id]);
      const nonces = await app.database.db.selectFrom('nonces').select('key').where('key', '=', `${bot.id}:${nonce}`).execute();
      assert.equal(nonces.length, 1);
    });

    it('a request that fails in the database fails alone: the others of the moment are accepted', async () => {
      const bot = await newBot('poisoned');
      const [good1, poison, good2] = await newMatches(3);
      // A real failure inside the request's transaction: any job for the poisoned match raises.
      if (dialect === 'postgres') {
        await sql`create function test_poison() returns trigger language plpgsql as $$
          begin if new.match_id = ${sql.lit(poison!)} then raise exception 'poisoned match'; end if; return new; end $$`.execute(app.database.db);
        await sql`create trigger test_poison before insert on enrichment_jobs for each row execute function test_poison()`.execute(app.database.db);
      } else {
        await sql`create trigger test_poison before insert on enrichment_jobs when new.match_id = ${sql.lit(poison!)}
          begin select raise(abort, 'poisoned match'); end`.execute(app.database.db);
      }
      try {
        const result = await Promise.all([good1, poison, good2].map((id) => send(bot, id!)));
        assert.deepEqual(
          result.map((response) => response.status),
          [202, 500, 202],
        );
        assert.deepEqual((await jobsOf(bot)).sort(), [good1, good2].sort());
      } finally {
        await sql`drop trigger test_poison${sql.raw(dialect === 'postgres' ? ' on enrichment_jobs' : '')}`.execute(app.database.db);
        if (dialect === 'postgres') await sql`drop function test_poison()`.execute(app.database.db);
      }
    });

    it('the events of requests at once reach subscribers and the webhook outbox: one delivery row each, the stored JSON', async () => {
      assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/hook' } })).status, 200);
      try {
        const bots = [await newBot('order-a'), await newBot('order-b'), await newBot('order-c')];
        const matches = await newMatches(9);
        const seen: StoredEvent[] = [];
        const unsubscribe = app.events.subscribe((event) => seen.push(event));
        try {
          const result = await Promise.all(matches.map((id, i) => send(bots[i % 3]!, id)));
          assert.ok(result.every((response) => response.status === 202));
          const requested = seen.filter((event) => event.payload.event_type === 'enrichment.requested');
          assert.equal(requested.length, 9);
          const seqs = requested.map((event) => event.seq).sort((a, b) => a - b);
          assert.deepEqual(
            requested.map((event) => (event.payload.detail as { job_id: number }).job_id).sort((a, b) => a - b),
            result.map((response) => response.body.job_id as number).sort((a, b) => a - b),
          );
          const stored = await app.database.db.selectFrom('events').select(['seq', 'payload']).where('seq', 'in', seqs).orderBy('seq').execute();
          assert.deepEqual(
            stored.map((row) => [Number(row.seq), row.payload]),
            [...requested].sort((a, b) => a.seq - b.seq).map((event) => [event.seq, event.json]),
          );
          const deliveries = await app.database.db.selectFrom('webhook_deliveries').select(['event_seq']).where('event_seq', 'in', seqs).execute();
          assert.deepEqual(
            deliveries.map((row) => Number(row.event_seq)).sort((a, b) => a - b),
            seqs,
            'one delivery row per event',
          );
        } finally {
          unsubscribe();
        }
      } finally {
        await app.api('POST', '/api/settings/integration', { webhook: { enabled: false } });
      }
    });

    it('a bot deleted while an instance still holds its secret (cached 5 s) gets no job: its row lock would serialize nothing', async () => {
      const bot = await newBot('deleted-meanwhile');
      const [warm, ...matches] = await newMatches(7);
      assert.equal((await send(bot, warm!)).status, 202, 'the secret is cached now');
      // Deleted on another instance: this one's cache still has the secret.
      await app.database.db.deleteFrom('bots').where('id', '=', bot.id).execute();
      const responses = await Promise.all(matches.map((id) => send(bot, id)));
      assert.deepEqual(
        responses.map((response) => response.status),
        [401, 401, 401, 401, 401, 401],
      );
      assert.deepEqual(await jobsOf(bot), [warm]);
    });

    // PostgreSQL only: SQLite has no functions.
    if (dialect === 'postgres')
      it("needs no database function: the previous release's PL/pgSQL request function dropped, requests are still accepted", async () => {
        // Migration 012's function stays while the previous release (0.2.0) may run beside this one
        // (docs/architecture.md, "Upgrades"); this release must not need it.
        await sql`drop function mothership_request_enrichment_batch(text[], text[], text[], text[], integer, text[], text[], text[], text[], text[])`.execute(
          app.database.db,
        );
        const bot = await newBot('no-function');
        const [match] = await newMatches(1);
        assert.equal((await send(bot, match!)).status, 202);
        assert.deepEqual(await jobsOf(bot), [match]);
      });
  });
}
