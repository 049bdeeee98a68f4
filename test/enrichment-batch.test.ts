import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import type { StoredEvent } from '../src/events/index.js';
import { startTestApp, type TestApp } from './helpers/app.js';
import { botRequest } from './helpers/bot.js';
import { REPLAY } from './helpers/fixtures.js';

type Bot = { id: string; shared_secret: string };

/** PostgreSQL: the enrichment requests of one event-loop turn go to the database as one batch call. */
describe('enrichment request batches (postgres)', () => {
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
  /** Runs `work` and tells how the batches went meanwhile. */
  const counted = async <T>(work: () => Promise<T>) => {
    const before = { ...app.enrichment.queue.batchStats };
    const result = await work();
    const stats = app.enrichment.queue.batchStats;
    return { result, batches: stats.batches - before.batches, items: stats.items - before.items, fallbacks: stats.fallbacks - before.fallbacks };
  };

  before(async () => {
    app = await startTestApp('postgres');
  });
  after(() => app.cleanup());

  it('8 requests of one bot in one turn share one batch: exactly 5 accepted, the rest 429 quota_exceeded', async () => {
    const bot = await newBot('quota-batch');
    const matches = await newMatches(8);
    const { result: responses, batches, items, fallbacks } = await counted(() => Promise.all(matches.map((id) => send(bot, id))));
    assert.deepEqual({ batches, items, fallbacks }, { batches: 1, items: 8, fallbacks: 0 });
    const statuses = responses.map((response) => response.status);
    assert.deepEqual(statuses, [202, 202, 202, 202, 202, 429, 429, 429], 'input order is processing order');
    for (const response of responses.slice(5)) assert.equal(response.body.code, 'quota_exceeded');
    assert.deepEqual(
      responses.map((response) => /"daily";r=(\d+)/.exec(String(response.headers.ratelimit))?.[1]),
      ['4', '3', '2', '1', '0', '0', '0', '0'],
    );
    const jobs = await app.database.db.selectFrom('enrichment_jobs').select('match_id').where('bot_id', '=', bot.id).execute();
    assert.equal(jobs.length, 5);
  });

  it('two bots requesting the same match in one batch: one queued, one duplicate of the same job', async () => {
    const [first, second] = [await newBot('dup-a'), await newBot('dup-b')];
    const [match] = await newMatches(1);
    const { result, batches, fallbacks } = await counted(() => Promise.all([send(first, match!), send(second, match!)]));
    assert.deepEqual({ batches, fallbacks }, { batches: 1, fallbacks: 0 });
    assert.deepEqual(
      result.map((response) => [response.status, response.body.duplicate, response.body.status]),
      [
        [202, false, 'queued'],
        [202, true, 'queued'],
      ],
    );
    assert.equal(result[0]!.body.job_id, result[1]!.body.job_id);
    assert.match(String(result[1]!.headers.ratelimit), /"daily";r=5;/, 'a duplicate costs the second bot nothing');
  });

  it('the same nonce twice in one batch: one accepted, one 401, one nonce row', async () => {
    const bot = await newBot('nonce-batch');
    const matches = await newMatches(2);
    const nonce = 'same-nonce-in-one-batch';
    const { result, batches, fallbacks } = await counted(() => Promise.all(matches.map((id) => send(bot, id, nonce))));
    assert.deepEqual({ batches, fallbacks }, { batches: 1, fallbacks: 0 });
    assert.deepEqual(
      result.map((response) => response.status),
      [202, 401],
    );
    const jobs = await app.database.db.selectFrom('enrichment_jobs').select('match_id').where('bot_id', '=', bot.id).execute();
    assert.deepEqual(
      jobs.map((job) => job.match_id),
      [matches[0]],
      'the refused request wrote nothing',
    );
    const nonces = await app.database.db.selectFrom('nonces').select('key').where('key', '=', `${bot.id}:${nonce}`).execute();
    assert.equal(nonces.length, 1);
  });

  it('a batch call that fails as a whole answers every item, each retried as a batch of its own', async () => {
    const bot = await newBot('fallback-batch');
    const [good1, poison, good2] = await newMatches(3);
    // A real failure inside the batch's transaction: any job for the poisoned match raises.
    await sql`create function test_poison() returns trigger language plpgsql as $$
      begin if new.match_id = ${sql.lit(poison!)} then raise exception 'poisoned match'; end if; return new; end $$`.execute(app.database.db);
    await sql`create trigger test_poison before insert on enrichment_jobs for each row execute function test_poison()`.execute(app.database.db);
    try {
      const { result, batches, fallbacks } = await counted(() => Promise.all([good1, poison, good2].map((id) => send(bot, id!))));
      assert.deepEqual({ batches, fallbacks }, { batches: 1 + 3, fallbacks: 1 }, 'the batch, then each request alone');
      assert.deepEqual(
        result.map((response) => response.status),
        [202, 500, 202],
      );
      const jobs = await app.database.db.selectFrom('enrichment_jobs').select('match_id').where('bot_id', '=', bot.id).orderBy('id').execute();
      assert.deepEqual(
        jobs.map((job) => job.match_id),
        [good1, good2],
      );
    } finally {
      await sql`drop trigger test_poison on enrichment_jobs`.execute(app.database.db);
      await sql`drop function test_poison()`.execute(app.database.db);
    }
  });

  it("a batch's events reach the stream and the webhook outbox in seq order, one delivery row each", async () => {
    assert.equal((await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/hook' } })).status, 200);
    try {
      const bots = [await newBot('order-a'), await newBot('order-b'), await newBot('order-c')];
      const matches = await newMatches(9);
      const seen: StoredEvent[] = [];
      const unsubscribe = app.events.subscribe((event) => seen.push(event));
      try {
        const { result, batches, fallbacks } = await counted(() => Promise.all(matches.map((id, i) => send(bots[i % 3]!, id))));
        assert.deepEqual({ batches, fallbacks }, { batches: 1, fallbacks: 0 });
        assert.ok(result.every((response) => response.status === 202));
        const requested = seen.filter((event) => event.payload.event_type === 'enrichment.requested');
        assert.equal(requested.length, 9);
        const seqs = requested.map((event) => event.seq);
        assert.deepEqual(
          seqs,
          [...seqs].sort((a, b) => a - b),
          'published in seq order',
        );
        const jobIds = requested.map((event) => (event.payload.detail as { job_id: number }).job_id);
        assert.deepEqual(
          jobIds,
          [...jobIds].sort((a, b) => a - b),
          "seq order is the batch's order",
        );
        assert.deepEqual(
          [...jobIds].sort((a, b) => a - b),
          result.map((response) => response.body.job_id as number).sort((a, b) => a - b),
        );
        const stored = await app.database.db.selectFrom('events').select(['seq', 'payload']).where('seq', 'in', seqs).orderBy('seq').execute();
        assert.deepEqual(
          stored.map((row) => [Number(row.seq), row.payload]),
          requested.map((event) => [event.seq, event.json]),
        );
        const deliveries = await app.database.db.selectFrom('webhook_deliveries').select(['event_seq', 'payload']).where('event_seq', 'in', seqs).execute();
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

  it("the secrets of several bots' first requests in one turn are read in one query", async () => {
    const bots = [await newBot('secret-a'), await newBot('secret-b'), await newBot('secret-c')];
    const matches = await newMatches(3);
    bots.forEach((bot) => app.enrichment.bots.invalidate(bot.id));
    const before = app.enrichment.bots.secretReads;
    const responses = await Promise.all(matches.map((id, i) => send(bots[i]!, id)));
    assert.deepEqual(
      responses.map((response) => response.status),
      [202, 202, 202],
    );
    assert.equal(app.enrichment.bots.secretReads - before, 1);
  });

  it('a bot deleted while an instance still holds its secret (cached 5 s) gets no job: its row lock would serialize nothing (outside attack)', async () => {
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
    const jobs = await app.database.db.selectFrom('enrichment_jobs').select('match_id').where('bot_id', '=', bot.id).execute();
    assert.deepEqual(
      jobs.map((job) => job.match_id),
      [warm],
    );
  });
});
