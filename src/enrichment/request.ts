import type { Database, Db } from '../db/index.js';
import { prepare } from '../db/index.js';
import type { Emit, EventLog } from '../events/index.js';
import type { DatabaseNonceStore } from './bot-auth.js';
import { replayRefusal, type Rule } from './commentary.js';
import { BotRefused, matchNotCompleted, matchNotFound, replayInvalid, replayUnusable } from './errors.js';
import { oldestJob, type JobState, type WaitEstimate } from './estimate.js';
import { AtQuota, DAILY_QUOTA, leavesWindowAt, quotaExceeded, quotaLeft, windowEnd, windowStart } from './quota.js';

export interface EnqueueResult {
  match_id: string;
  job_id: number;
  status: JobState;
  duplicate: boolean;
  /** The job is this bot's: its status (`GET /api/matches/{id}/enrichment`) answers this bot, not only the one that asked first. */
  own: boolean;
  requested_at: string;
  estimated_wait_seconds: number;
  quota_remaining: number;
  /** Seconds until the oldest counted job leaves the 24 h window (0 when none is counted). */
  quota_reset_seconds: number;
}

/** One request inside its transaction: who asks for which match, when, and the quota it found. */
interface Ask {
  botId: string;
  matchId: string;
  at: string;
  nowMs: number;
  used: number;
  oldest: string | null;
}

/**
 * The request's statements, built and compiled by Kysely once for the database's dialect
 * (db/prepared.ts): only the values change per request.
 */
function requestQueries(database: Database) {
  return {
    lockBot: prepare(database, ['botId'], (db, param) => database.forUpdate(db.selectFrom('bots').select('id').where('id', '=', param('botId')))),
    counted: prepare(database, ['botId', 'since', 'until'], (db, param) =>
      db
        .selectFrom('enrichment_jobs')
        .select('enqueued_at')
        .where('bot_id', '=', param('botId'))
        .where('enqueued_at', '>', param('since'))
        .where('enqueued_at', '<=', param('until'))
        .orderBy('enqueued_at'),
    ),
    // A completed, never requested match with a replay, marked requested in one step (its row lock on PostgreSQL).
    claimMatch: prepare(database, ['at', 'matchId'], (db, param) =>
      db
        .updateTable('matches')
        .set({ enrichment_requested_at: param('at'), enrichment_status: 'queued', enrichment_error: null })
        .where('id', '=', param('matchId'))
        .where('status', '=', 'completed')
        .where('enrichment_requested_at', 'is', null)
        .where('replay', 'is not', null)
        .returning('replay'),
    ),
    // The new job's id and the head of the queue, for its place in it.
    insertJob: prepare(database, ['matchId', 'botId', 'at'], (db, param) =>
      db
        .insertInto('enrichment_jobs')
        .values({ match_id: param('matchId'), bot_id: param('botId'), state: 'queued', attempts: 0, run_after: param('at'), enqueued_at: param('at') })
        .returning((eb) => ['id', oldestJob(eb, 'queued'), oldestJob(eb, 'running')]),
    ),
    match: prepare(database, ['matchId'], (db, param) =>
      db.selectFrom('matches').select(['status', 'enrichment_requested_at']).where('id', '=', param('matchId')),
    ),
    jobOfMatch: prepare(database, ['matchId'], (db, param) =>
      db.selectFrom('enrichment_jobs').select(['id', 'state', 'bot_id']).where('match_id', '=', param('matchId')),
    ),
  };
}

/**
 * The enrichment request (docs/enrichment.md, steps 2 to 5): one TypeScript transaction on both
 * databases. The bot's row lock (PostgreSQL: `FOR UPDATE`; SQLite's write transaction is serial
 * already) serializes one bot's requests on every instance, so the quota is counted after the
 * previous holder committed and no bot ever gets a sixth job; the unique index on match_id backs
 * idempotency. Lock order, as every writer of these rows: the bot, then the match, then the event
 * append's lock (EventLog), so requests never wait on each other in a cycle.
 */
export class EnrichmentRequests {
  private readonly atQuota = new AtQuota();
  private readonly queries: ReturnType<typeof requestQueries>;

  constructor(
    private readonly database: Database,
    private readonly events: EventLog,
    private readonly estimate: WaitEstimate,
    private readonly options: { nonces: DatabaseNonceStore; replayRule: Rule },
  ) {
    this.queries = requestQueries(database);
  }

  /**
   * Quota, nonce, match checks, idempotency, enqueue, in that order. `nonce` is recorded in the same
   * transaction: a refused request rolls back and writes nothing. A match whose stored replay the
   * worker would refuse is refused before the job counts.
   */
  request(botId: string, matchId: string, nonce?: string): Promise<EnqueueResult> {
    const refusal = this.atQuota.refusal(botId, Date.now());
    if (refusal) return Promise.reject(refusal);
    return this.events.write(async (trx, emit) => {
      const nowMs = Date.now();
      const ask: Ask = { botId, matchId, at: new Date(nowMs).toISOString(), nowMs, ...(await this.admit(trx, botId, nowMs)) };
      if (nonce && !(await this.options.nonces.firstUseWithin(trx, nonce))) throw new BotRefused('nonce already used');
      return (await this.enqueue(trx, emit, ask)) ?? (await this.existing(trx, ask));
    });
  }

  /** Each bot's jobs counted against its quota right now (the rolling window of `request`). */
  async quotaUse(nowMs = Date.now()): Promise<Map<string, number>> {
    const rows = await this.database.db
      .selectFrom('enrichment_jobs')
      .select(['bot_id', (eb) => eb.fn.countAll<number>().as('used')])
      .where('enqueued_at', '>', windowStart(nowMs))
      .where('enqueued_at', '<=', windowEnd(nowMs))
      .groupBy('bot_id')
      .execute();
    return new Map(rows.map((row) => [row.bot_id, Number(row.used)]));
  }

  /** Forgets the bots remembered at quota: only for jobs changed behind the service's back (tests moving them in time). */
  forgetQuotas(): void {
    this.atQuota.forget();
  }

  /**
   * Locks the bot's row and counts its quota after the lock. A bot deleted meanwhile (another
   * instance may still serve its secret from its cache) is refused: the lock of a row that does not
   * exist would serialize nothing.
   */
  private async admit(trx: Db, botId: string, nowMs: number): Promise<{ used: number; oldest: string | null }> {
    const [bot] = (await this.queries.lockBot.execute(trx, { botId })).rows;
    if (!bot) throw new BotRefused('bot deleted');
    const { rows: counted } = await this.queries.counted.execute(trx, { botId, since: windowStart(nowMs), until: windowEnd(nowMs) });
    const oldest = counted[0]?.enqueued_at ?? null;
    if (counted.length >= DAILY_QUOTA) {
      this.atQuota.remember(botId, leavesWindowAt(oldest!));
      throw quotaExceeded(botId, leavesWindowAt(oldest!), nowMs);
    }
    return { used: counted.length, oldest };
  }

  /**
   * Claims a completed, never requested match with a replay in one conditional update (its row lock
   * on PostgreSQL), then enqueues its job and the event; null when the match was not claimable.
   */
  private async enqueue(trx: Db, emit: Emit, ask: Ask): Promise<EnqueueResult | null> {
    const [claimed] = (await this.queries.claimMatch.execute(trx, { at: ask.at, matchId: ask.matchId })).rows;
    if (!claimed) return null;
    // Thrown, the claim rolls back with the nonce.
    const refusal = replayRefusal(this.options.replayRule, JSON.parse(claimed.replay!));
    if (refusal) throw replayInvalid(ask.matchId, refusal.field, refusal.message);
    const [job] = (await this.queries.insertJob.execute(trx, { matchId: ask.matchId, botId: ask.botId, at: ask.at })).rows;
    const jobId = Number(job!.id);
    emit('enrichment.requested', { detail: { match_id: ask.matchId, bot_id: ask.botId, job_id: jobId } });
    return this.answer(trx, { ...ask, used: ask.used + 1, oldest: ask.oldest ?? ask.at }, { jobId, state: 'queued', requestedAt: ask.at, own: true }, job);
  }

  /** A match that could not be claimed: why it is refused, or its job when it was requested before (no quota used). */
  private async existing(trx: Db, ask: Ask): Promise<EnqueueResult> {
    const match = await trx.selectFrom('matches').select(['status', 'enrichment_requested_at']).where('id', '=', ask.matchId).executeTakeFirst();
    if (!match) throw matchNotFound(ask.matchId);
    if (match.status !== 'completed') throw matchNotCompleted(ask.matchId, match.status);
    // Completed, never requested, not claimed: no replay. Refused before it is counted: a request that
    // could only fail must not cost the bot its quota.
    if (match.enrichment_requested_at === null) throw replayUnusable(ask.matchId);
    const [job] = (await this.queries.jobOfMatch.execute(trx, { matchId: ask.matchId })).rows;
    return this.answer(trx, ask, {
      jobId: Number(job!.id),
      state: job!.state,
      requestedAt: match.enrichment_requested_at,
      duplicate: true,
      own: job!.bot_id === ask.botId,
    });
  }

  private async answer(
    trx: Db,
    ask: Ask,
    job: { jobId: number; state: JobState; requestedAt: string; duplicate?: boolean; own: boolean },
    head?: { queued: number | null; running: number | null },
  ): Promise<EnqueueResult> {
    const quota = quotaLeft(ask.used, ask.oldest, ask.nowMs);
    return {
      match_id: ask.matchId,
      job_id: job.jobId,
      status: job.state,
      duplicate: job.duplicate ?? false,
      own: job.own,
      requested_at: job.requestedAt,
      estimated_wait_seconds: await this.estimate.seconds(trx, job.jobId, job.state, head),
      quota_remaining: quota.remaining,
      quota_reset_seconds: quota.resetSeconds,
    };
  }
}
