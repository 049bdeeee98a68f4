import { sql, type ExpressionBuilder, type SelectQueryBuilder, type Updateable } from 'kysely';
import type { Database, Db } from '../db/index.js';
import { now } from '../db/index.js';
import { prepare } from '../db/index.js';
import { PRUNE_CHUNK } from '../db/index.js';
import type { EnrichmentJobsTable, Schema } from '../db/index.js';
import { makeEvent, type EventLog, type EventPayload, type StoredEvent } from '../events/index.js';
import { BOT_CHALLENGE, ProblemError, unauthorized } from '../http/index.js';
import DataLoader from 'dataloader';
import { LRUCache } from 'lru-cache';
import { memo } from '../memo.js';
import { newWebhookId } from '../webhook/index.js';
import type { DatabaseNonceStore } from './bot-auth.js';
import { replayRefusal, type ReplayError, type Rule } from './commentary.js';

/**
 * The enrichment job queue, in the database (SQLite or PostgreSQL), with an explicit state machine:
 *
 *   queued --claim--> running --complete--> completed
 *     ^                 |  \--fail (attempts left)--> queued (run_after = now + backoff)
 *     |                 \--fail (no attempts left)--> failed
 *     \--lease expired (worker died): claimed again, counting an attempt
 */
/** The daily quota's name in the RateLimit fields and in a 429's `violated-policies`. */
export const QUOTA_POLICY = 'daily';
export const DAILY_QUOTA = 5;
export const QUOTA_WINDOW_MS = 24 * 60 * 60 * 1000;
export const MAX_ATTEMPTS = 3;
/** Estimate used until jobs have finished: what the built-in generator takes, rounded up generously. */
export const PRIOR_JOB_SECONDS = 5;
export const WORKER_HEARTBEAT_MS = 5000;

export type JobState = EnrichmentJobsTable['state'];
/** The oldest queued and the oldest running job: where the queue starts. */
type QueueHead = { queued: number | null; running: number | null };
export type Job = Pick<EnrichmentJobsTable, 'match_id' | 'bot_id' | 'state' | 'attempts' | 'lease_owner'> & { id: number };

export interface EnqueueResult {
  match_id: string;
  job_id: number;
  status: JobState;
  duplicate: boolean;
  requested_at: string;
  estimated_wait_seconds: number;
  quota_remaining: number;
  /** Seconds until the oldest counted job leaves the 24 h window (0 when none is counted). */
  quota_reset_seconds: number;
}

/** Backoff before attempt n+1 after attempt n failed: base, then 4 x base (1 s, 4 s by default). */
export const retryDelayMs = (attempts: number, baseMs: number) => baseMs * 4 ** (attempts - 1);

/**
 * A pending job's place in the queue, itself included: its distance from the oldest pending job.
 * Jobs between the two that finished out of order (a retry waiting for its backoff while later jobs
 * completed) still count, so it can only overestimate, by at most the jobs finished out of order.
 */
export function jobsAhead(jobId: number, oldestQueued: number | null, oldestRunning: number | null): number {
  const heads = [oldestQueued, oldestRunning].filter((id): id is number => id !== null).map(Number);
  return heads.length ? Math.max(1, jobId - Math.min(...heads) + 1) : 1;
}

/** Jobs ahead x mean job duration / live workers, rounded up; at least 1 s while pending. */
export const estimateWaitSeconds = (ahead: number, meanSeconds: number, workers: number): number =>
  Math.max(1, Math.ceil((ahead * meanSeconds) / Math.max(1, workers)));

/** The estimate's slow-moving inputs (mean job duration, live workers) are refreshed at most this often. */
const ESTIMATE_INPUTS_MS = 1000;

/** What the PostgreSQL batch function (db/migrations.ts 012) answers for one request. */
interface RequestRow {
  outcome: 'quota_exceeded' | 'replay' | 'unknown_bot' | 'match_not_found' | 'match_not_completed' | 'replay_unusable' | 'duplicate' | 'queued';
  job_id: number | null;
  job_state: JobState | null;
  requested_at: string | null;
  match_status: string | null;
  used: number;
  oldest: string | null;
  queued: number | null;
  running: number | null;
  seq: number | null;
  delivery: boolean | null;
}

/** The inputs of one PostgreSQL request: a column each of the batch function's arrays. */
interface RequestParams {
  botId: string;
  matchId: string;
  at: string;
  since: string;
  nonce: string | null;
  nonceExpires: string | null;
  eventHead: string;
  eventTail: string;
  webhookId: string;
}

/** The batch function's (migration 012) row for the request at `idx` (1-based) of its input. */
type BatchRow = RequestRow & { idx: number };

interface PendingRequest {
  params: RequestParams;
  stored: (seq: number, jobId: number) => StoredEvent;
  resolve: (row: RequestRow) => void;
  reject: (error: unknown) => void;
}

/** Requests per batch call at most, as SQLite's group commit (db/group-commit.ts). */
const MAX_REQUEST_BATCH = 64;

/**
 * The queries of every enrichment request, compiled once (db/prepared.ts). SQLite: a fresh request is
 * three statements (its write lock serializes one bot's requests), two of them doing two jobs each.
 * PostgreSQL: one statement, a function call (every statement there is a network round trip).
 */
function requestQueries(database: Database) {
  return {
    // PostgreSQL: requests in one call of the batch function (migration 012), one array per input, one row per request.
    batch:
      database.dialect === 'postgres'
        ? prepare(database, ['bots', 'matches', 'ats', 'sinces', 'quota', 'nonces', 'nonceExpires', 'eventHeads', 'eventTails', 'webhookIds'], (db, param) =>
            db
              .selectFrom(
                sql<BatchRow>`mothership_request_enrichment_batch(${param('bots')}::text[], ${param('matches')}::text[], ${param('ats')}::text[], ${param('sinces')}::text[], ${param('quota')}, ${param('nonces')}::text[], ${param('nonceExpires')}::text[], ${param('eventHeads')}::text[], ${param('eventTails')}::text[], ${param('webhookIds')}::text[])`.as(
                  'r',
                ),
              )
              .selectAll(),
          )
        : null,
    quotaUsed: prepare(database, ['botId', 'since'], (db, param) =>
      db
        .selectFrom('enrichment_jobs')
        .select('enqueued_at')
        .where('bot_id', '=', param('botId'))
        .where('enqueued_at', '>', param('since'))
        .orderBy('enqueued_at'),
    ),
    // Marks a completed, not yet requested match with a replay in one step, returning the replay for the
    // worker's rule; no row means the slower path explains why.
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
    // The replay a request for the match would enqueue a job for (none: the request enqueues nothing, or is refused for another reason).
    // The replays the requests of one turn would enqueue jobs for, in one read (`replaysToEnqueue`).
    replaysToEnqueue:
      database.dialect === 'postgres'
        ? prepare(database, ['ids'], (db, param) =>
            db
              .selectFrom('matches')
              .select(['id', 'replay'])
              .where('id', '=', sql<string>`any(${param('ids')}::text[])`)
              .where('status', '=', 'completed')
              .where('enrichment_requested_at', 'is', null)
              .where('replay', 'is not', null),
          )
        : null,
    match: prepare(database, ['matchId'], (db, param) =>
      db
        .selectFrom('matches')
        .select((eb) => ['status', 'enrichment_requested_at', eb('replay', 'is', null).as('replay_missing')])
        .where('id', '=', param('matchId')),
    ),
    jobOfMatch: prepare(database, ['matchId'], (db, param) =>
      db.selectFrom('enrichment_jobs').select(['id', 'state']).where('match_id', '=', param('matchId')),
    ),
    // The new job's id and the head of the queue, for its place in it.
    insertJob: prepare(database, ['matchId', 'botId', 'at'], (db, param) =>
      db
        .insertInto('enrichment_jobs')
        .values({
          match_id: param('matchId'),
          bot_id: param('botId'),
          state: 'queued',
          attempts: 0,
          run_after: param('at'),
          lease_owner: null,
          lease_expires_at: null,
          enqueued_at: param('at'),
          started_at: null,
          finished_at: null,
          last_error: null,
        })
        .returning((eb) => ['id', queueHead(eb, 'queued'), queueHead(eb, 'running')]),
    ),
    queueHead: prepare(database, [], (db) => db.selectNoFrom((eb) => [queueHead(eb, 'queued'), queueHead(eb, 'running')])),
  };
}

/** Bots remembered at their quota, at most (least recently refused forgotten first). */
const AT_QUOTA_BOTS = 10_000;

/** When a job enqueued at `enqueuedAt` stops counting against the quota. */
const leavesWindowAt = (enqueuedAt: string) => Date.parse(enqueuedAt) + QUOTA_WINDOW_MS;
const secondsUntil = (atMs: number, nowMs: number) => Math.max(1, Math.ceil((atMs - nowMs) / 1000));

/** Seconds until the oldest job counted against the quota leaves the window (0 when none is counted). */
const quotaResetSeconds = (oldest: string | null, nowMs: number) => (oldest ? secondsUntil(leavesWindowAt(oldest), nowMs) : 0);

/** A refusal for the quota, carrying when the oldest counted job leaves the window (the refusal holds until then). */
class QuotaExceeded extends ProblemError {
  constructor(
    botId: string,
    readonly freeAtMs: number,
    nowMs: number,
  ) {
    const retryAfter = secondsUntil(freeAtMs, nowMs);
    super(
      'quota_exceeded',
      `Bot "${botId}" has used its ${DAILY_QUOTA} enrichment requests of the last 24 hours`,
      undefined,
      { 'retry-after': String(retryAfter), 'x-quota-remaining': '0', 'x-quota-reset': String(retryAfter) },
      { 'violated-policies': [QUOTA_POLICY] },
    );
  }
}

/** The opaque 401 for a signed request the database refused, with the reason for the log (routes.ts). */
export const refusedInDatabase = (reason: string) => Object.assign(unauthorized(BOT_CHALLENGE), { reason });

const matchNotFound = (matchId: string) => new ProblemError('match_not_found', `Match "${matchId}" does not exist`);
const matchNotCompleted = (matchId: string, status: string) => new ProblemError('match_not_completed', `Match "${matchId}" is ${status}, not completed`);
const replayUnusable = (matchId: string) =>
  new ProblemError('replay_unusable', `Match "${matchId}" has no replay to write commentary from; set one with PATCH /api/matches/${matchId}`);
const replayInvalid = (matchId: string, refusal: ReplayError) =>
  new ProblemError(
    'replay_invalid',
    `Match "${matchId}" has a replay the worker cannot read (${refusal.field}: ${refusal.message}); correct it with PATCH /api/matches/${matchId}`,
    [{ path: refusal.field, message: refusal.message }],
  );

/**
 * The `enrichment.requested` event's JSON around its job id, which only the database function knows
 * (it joins head, id and tail), and the event with the id filled in.
 */
function requestedEvent(matchId: string, botId: string, at: string) {
  const json = JSON.stringify(makeEvent('enrichment.requested', { detail: { match_id: matchId, bot_id: botId, job_id: 0 } }, at));
  const slot = json.lastIndexOf('"job_id":0') + '"job_id":'.length;
  const [head, tail] = [json.slice(0, slot), json.slice(slot + 1)];
  return {
    head,
    tail,
    stored: (seq: number, jobId: number): StoredEvent => {
      const text = head + jobId + tail;
      return { seq, json: text, payload: JSON.parse(text) as EventPayload };
    },
  };
}

/**
 * The oldest job in a state: one index lookup. Counting the pending jobs below a job instead would
 * scan the whole queue on every request.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- used inside queries over different tables
const queueHead = (eb: ExpressionBuilder<Schema, any>, state: JobState) =>
  eb
    .selectFrom('enrichment_jobs')
    .select((inner) => inner.fn.min('id').as('id'))
    .where('state', '=', state)
    .as(state);

export class EnrichmentQueue {
  private readonly estimateInputs = memo(ESTIMATE_INPUTS_MS, async (trx: Db) => ({
    meanSeconds: await this.meanJobSeconds(trx),
    workers: await this.liveWorkers(trx),
  }));

  private readonly queries: ReturnType<typeof requestQueries>;
  /**
   * Bots found at their quota, with the time their oldest counted job leaves the window. Until then
   * they stay at quota on every instance (a job's enqueued_at never changes and retention deletes only
   * jobs outside the window), so their requests are refused from memory, with no database read.
   */
  private readonly atQuota = new LRUCache<string, number>({ max: AT_QUOTA_BOTS });
  /** PostgreSQL: requests waiting for the next batch call, and whether one is running. */
  private pending: PendingRequest[] = [];
  private draining = false;
  /** PostgreSQL: the stored replay a request would enqueue a job for (null: none to check). */
  private readonly replayToEnqueue: DataLoader<string, string | null>;
  /** How the PostgreSQL requests went to the database (tests and diagnostics). */
  readonly batchStats = { batches: 0, items: 0, fallbacks: 0 };

  constructor(
    private readonly database: Database,
    private readonly events: EventLog,
    private readonly options: { leaseMs: number; retryBaseMs: number; nonces: DatabaseNonceStore; replayRule: Rule },
  ) {
    this.queries = requestQueries(database);
    this.replayToEnqueue = new DataLoader(
      async (ids) => {
        const { rows } = await this.queries.replaysToEnqueue!.execute(this.database.db, { ids });
        const byId = new Map(rows.map((row) => [row.id, row.replay]));
        return ids.map((id) => byId.get(id) ?? null);
      },
      // One read for the turn's requests, so they still reach the batch function together.
      { cache: false, maxBatchSize: 1000, batchScheduleFn: (run) => setImmediate(run) },
    );
  }

  /** Each bot's jobs counted against its quota right now (the rolling 24 h window of `request`). */
  async quotaUse(nowMs = Date.now()): Promise<Map<string, number>> {
    const rows = await this.database.db
      .selectFrom('enrichment_jobs')
      .select(['bot_id', (eb) => eb.fn.countAll<number>().as('used')])
      .where('enqueued_at', '>', new Date(nowMs - QUOTA_WINDOW_MS).toISOString())
      .groupBy('bot_id')
      .execute();
    return new Map(rows.map((row) => [row.bot_id, Number(row.used)]));
  }

  /**
   * Steps 2 to 5 of an enrichment request (docs/enrichment.md), in one transaction: quota, match
   * checks, idempotency, enqueue. Concurrent requests of one bot (on any instance) are serialized and
   * never enqueue a sixth job; the unique index on match_id backs idempotency. `nonce` is recorded in
   * the same transaction, after the quota check: a refused request writes nothing. A match whose
   * stored replay the worker would refuse is refused at the match step, before the job counts.
   */
  async request(botId: string, matchId: string, nonce?: string): Promise<EnqueueResult> {
    const freeAtMs = this.atQuota.get(botId);
    const nowMs = Date.now();
    if (freeAtMs !== undefined && freeAtMs > nowMs) throw new QuotaExceeded(botId, freeAtMs, nowMs);
    try {
      return await (this.queries.batch ? this.requestInSql(botId, matchId, nonce) : this.requestInTransaction(botId, matchId, nonce));
    } catch (error) {
      if (error instanceof QuotaExceeded) this.atQuota.set(botId, error.freeAtMs);
      throw error;
    }
  }

  /** Forgets the bots remembered at quota: only for jobs changed behind the service's back (tests moving them in time). */
  forgetQuotas(): void {
    this.atQuota.clear();
  }

  /** SQLite: its write lock (one writer) serializes the requests; the statements join the group commit. */
  private requestInTransaction(botId: string, matchId: string, nonce: string | undefined): Promise<EnqueueResult> {
    const q = this.queries;
    return this.events.write(async (trx, emit) => {
      const nowMs = Date.now();
      const { rows: counted } = await q.quotaUsed.execute(trx, { botId, since: new Date(nowMs - QUOTA_WINDOW_MS).toISOString() });
      const oldest = counted[0]?.enqueued_at ?? null;
      if (counted.length >= DAILY_QUOTA) throw new QuotaExceeded(botId, leavesWindowAt(oldest!), nowMs);
      if (nonce && !(await this.options.nonces.firstUseWithin(trx, nonce))) throw refusedInDatabase('nonce already used');

      const at = new Date(nowMs).toISOString();
      const [claimed] = (await q.claimMatch.execute(trx, { matchId, at })).rows;
      // Thrown, the claim rolls back with the nonce.
      if (claimed) this.checkStoredReplay(matchId, claimed.replay);
      else {
        const [match] = (await q.match.execute(trx, { matchId })).rows;
        if (!match) throw matchNotFound(matchId);
        if (match.status !== 'completed') throw matchNotCompleted(matchId, match.status);
        // Refused before it is counted: a request that could only fail must not cost the bot its quota.
        if (match.enrichment_requested_at === null && match.replay_missing) throw replayUnusable(matchId);
        const [job] = (await q.jobOfMatch.execute(trx, { matchId })).rows;
        const [head] = job!.state === 'queued' || job!.state === 'running' ? (await q.queueHead.execute(trx, {})).rows : [];
        return this.answer(trx, {
          matchId,
          jobId: Number(job!.id),
          state: job!.state,
          duplicate: true,
          requestedAt: match.enrichment_requested_at!,
          used: counted.length,
          oldest,
          nowMs,
          head,
        });
      }

      const [job] = (await q.insertJob.execute(trx, { matchId, botId, at })).rows;
      const id = Number(job!.id);
      emit('enrichment.requested', { detail: { match_id: matchId, bot_id: botId, job_id: id } });
      return this.answer(trx, {
        matchId,
        jobId: id,
        state: 'queued',
        duplicate: false,
        requestedAt: at,
        used: counted.length + 1,
        oldest: oldest ?? at,
        nowMs,
        head: job,
      });
    });
  }

  /**
   * PostgreSQL: the requests of one event-loop turn share one call of a database function
   * (db/migrations.ts 012): the bot row locks, quota, nonce, match claim, job, and the event append with
   * its webhook outbox row, in the order and with the locks of the SQLite path and `EventLog.write`.
   * One commit, whose disk flush is what a request costs while the event-append lock is held, serves them all.
   */
  private async requestInSql(botId: string, matchId: string, nonce: string | undefined): Promise<EnqueueResult> {
    const nowMs = Date.now();
    const at = new Date(nowMs).toISOString();
    const event = requestedEvent(matchId, botId, at);
    await this.refuseUnreadableReplay(botId, matchId, nowMs);
    const entry = nonce ? this.options.nonces.entry(nonce, nowMs) : null;
    const params: RequestParams = {
      botId,
      matchId,
      at,
      since: new Date(nowMs - QUOTA_WINDOW_MS).toISOString(),
      nonce: entry?.key ?? null,
      nonceExpires: entry?.expires ?? null,
      eventHead: event.head,
      eventTail: event.tail,
      webhookId: newWebhookId(),
    };
    // The batch publishes the accepted requests' events itself, in seq order.
    const result = await new Promise<RequestRow>((resolve, reject) => {
      this.pending.push({ params, stored: event.stored, resolve, reject });
      if (this.draining) return;
      this.draining = true;
      setImmediate(() => void this.drain());
    });
    switch (result.outcome) {
      case 'quota_exceeded':
        throw new QuotaExceeded(botId, leavesWindowAt(result.oldest!), nowMs);
      case 'replay':
        throw refusedInDatabase('nonce already used');
      case 'unknown_bot':
        // Deleted on another instance while this one still held its secret (cached for 5 s).
        throw refusedInDatabase('bot deleted');
      case 'match_not_found':
        throw matchNotFound(matchId);
      case 'match_not_completed':
        throw matchNotCompleted(matchId, result.match_status!);
      case 'replay_unusable':
        throw replayUnusable(matchId);
    }
    const jobId = Number(result.job_id);
    const duplicate = result.outcome === 'duplicate';
    return this.answer(this.database.db, {
      matchId,
      jobId,
      state: result.job_state!,
      duplicate,
      requestedAt: result.requested_at!,
      used: duplicate ? result.used : result.used + 1,
      oldest: result.oldest ?? at,
      nowMs,
      head: result,
    });
  }

  /** Refuses a request for a match whose stored replay (JSON text) the worker would refuse. */
  private checkStoredReplay(matchId: string, replay: string | null): void {
    const refusal = replayRefusal(this.options.replayRule, replay === null ? null : JSON.parse(replay));
    if (refusal) throw replayInvalid(matchId, refusal);
  }

  /**
   * PostgreSQL: the worker's rule is TypeScript, so it runs before the batch function, on the replay
   * the request would enqueue a job for. A refusal still answers in the order of the steps: a bot at
   * its quota is refused for its quota first. Until the batch reads the match only a PATCH can change
   * the replay, and the PATCH is checked by the same rule.
   */
  private async refuseUnreadableReplay(botId: string, matchId: string, nowMs: number): Promise<void> {
    const stored = await this.replayToEnqueue.load(matchId);
    if (stored === null) return;
    try {
      this.checkStoredReplay(matchId, stored);
    } catch (error) {
      const { rows: counted } = await this.queries.quotaUsed.execute(this.database.db, { botId, since: new Date(nowMs - QUOTA_WINDOW_MS).toISOString() });
      if (counted.length >= DAILY_QUOTA) throw new QuotaExceeded(botId, leavesWindowAt(counted[0]!.enqueued_at), nowMs);
      throw error;
    }
  }

  /** One batch call at a time per instance: requests arriving meanwhile join the next one. */
  private async drain(): Promise<void> {
    try {
      while (this.pending.length) await this.runBatch(this.pending.splice(0, MAX_REQUEST_BATCH));
    } finally {
      this.draining = false;
    }
  }

  private async runBatch(batch: PendingRequest[]): Promise<void> {
    this.batchStats.batches++;
    this.batchStats.items += batch.length;
    let rows: BatchRow[];
    try {
      rows = await this.callBatch(batch);
    } catch (error) {
      if (batch.length === 1) return batch[0]!.reject(error);
      // A deadlock, a serialization failure, one item's unexpected error: the whole call rolled back.
      // Each request then goes as a batch of its own, so one bad item fails only itself.
      this.batchStats.fallbacks++;
      await Promise.all(batch.map((item) => this.runBatch([item])));
      return;
    }
    const byIndex = new Map(rows.map((row) => [Number(row.idx), row]));
    // One row per input, or no caller may be left waiting for ever.
    if (batch.some((_item, i) => !byIndex.has(i + 1))) {
      const error = new Error(`enrichment batch answered ${rows.length} rows for ${batch.length} requests`);
      batch.forEach((item) => item.reject(error));
      return;
    }
    const accepted = batch.flatMap((item, i) => {
      const row = byIndex.get(i + 1)!;
      return row.outcome === 'queued' ? [{ row, event: item.stored(Number(row.seq), Number(row.job_id)) }] : [];
    });
    if (accepted.length) {
      accepted.sort((a, b) => a.event.seq - b.event.seq);
      this.events.publishAppendedInSql(
        accepted.map((a) => a.event),
        accepted.some((a) => a.row.delivery === true),
      );
    }
    batch.forEach((item, i) => item.resolve(byIndex.get(i + 1)!));
  }

  private async callBatch(batch: PendingRequest[]): Promise<BatchRow[]> {
    const column = <K extends keyof RequestParams>(key: K) => batch.map((item) => item.params[key]);
    const { rows } = await this.queries.batch!.execute(this.database.db, {
      bots: column('botId'),
      matches: column('matchId'),
      ats: column('at'),
      sinces: column('since'),
      quota: DAILY_QUOTA,
      nonces: column('nonce'),
      nonceExpires: column('nonceExpires'),
      eventHeads: column('eventHead'),
      eventTails: column('eventTail'),
      webhookIds: column('webhookId'),
    });
    return rows;
  }

  private async answer(
    db: Db,
    a: {
      matchId: string;
      jobId: number;
      state: JobState;
      duplicate: boolean;
      requestedAt: string;
      used: number;
      oldest: string | null;
      nowMs: number;
      head: QueueHead | undefined;
    },
  ): Promise<EnqueueResult> {
    return {
      match_id: a.matchId,
      job_id: a.jobId,
      status: a.state,
      duplicate: a.duplicate,
      requested_at: a.requestedAt,
      estimated_wait_seconds:
        a.state === 'queued' || a.state === 'running' ? await this.waitSeconds(db, jobsAhead(a.jobId, a.head!.queued, a.head!.running)) : 0,
      quota_remaining: DAILY_QUOTA - a.used,
      quota_reset_seconds: quotaResetSeconds(a.used ? a.oldest : null, a.nowMs),
    };
  }

  /**
   * Jobs ahead (this one included) x recent mean job duration / live workers. With no finished job
   * yet the mean is PRIOR_JOB_SECONDS; with no live worker the estimate assumes one will start.
   */
  async estimate(trx: Db, jobId: number, state: JobState): Promise<number> {
    if (state === 'completed' || state === 'failed') return 0;
    const [head] = (await this.queries.queueHead.execute(trx, {})).rows;
    return this.waitSeconds(trx, jobsAhead(jobId, head!.queued, head!.running));
  }

  private async waitSeconds(trx: Db, ahead: number): Promise<number> {
    const { meanSeconds, workers } = await this.estimateInputs.get(trx);
    return estimateWaitSeconds(ahead, meanSeconds, workers);
  }

  /** Mean duration of the last 20 completed jobs, or the prior when none finished yet. */
  private async meanJobSeconds(trx: Db): Promise<number> {
    const recent = await trx
      .selectFrom('enrichment_jobs')
      .select(['started_at', 'finished_at'])
      .where('state', '=', 'completed')
      .orderBy('id', 'desc')
      .limit(20)
      .execute();
    const durations = recent
      .filter((job) => job.started_at && job.finished_at)
      .map((job) => (Date.parse(job.finished_at!) - Date.parse(job.started_at!)) / 1000);
    return durations.length ? durations.reduce((sum, value) => sum + value, 0) / durations.length : PRIOR_JOB_SECONDS;
  }

  private async liveWorkers(trx: Db): Promise<number> {
    const since = new Date(Date.now() - 3 * WORKER_HEARTBEAT_MS).toISOString();
    const row = await trx
      .selectFrom('workers')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('heartbeat_at', '>=', since)
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  /**
   * A match's enrichment. `bot`: the bot asking, which sees only matches it requested: any other
   * match, requested by another bot or by none, answers as if it did not exist (no commentary of
   * others, no probing which match ids exist).
   */
  async status(
    matchId: string,
    bot?: string,
  ): Promise<{ status: JobState | null; estimated_wait_seconds: number; commentary: string | null; error: string | null }> {
    // One statement, so the job's state and the match's outcome come from the same snapshot: read
    // apart, a job could already be `failed` while its match did not yet show the error.
    const match = await this.database.db
      .selectFrom('matches')
      .leftJoin('enrichment_jobs', 'enrichment_jobs.match_id', 'matches.id')
      .select(['matches.commentary', 'matches.enrichment_error', 'enrichment_jobs.id as job_id', 'enrichment_jobs.state', 'enrichment_jobs.bot_id'])
      .where('matches.id', '=', matchId)
      .executeTakeFirst();
    if (!match || (bot !== undefined && match.bot_id !== bot)) throw matchNotFound(matchId);
    if (match.job_id === null || match.state === null) return { status: null, estimated_wait_seconds: 0, commentary: null, error: null };
    return {
      status: match.state,
      estimated_wait_seconds: await this.estimate(this.database.db, Number(match.job_id), match.state),
      commentary: match.commentary,
      error: match.enrichment_error,
    };
  }

  /**
   * Retention (docs/enrichment.md): deletes the enrichments finished before `cutoff`, each match with
   * its job, and the matches over (completed or cancelled) that were never requested, created before
   * it; returns the rows deleted. A job the quota still counts (enqueued inside the 24 h window) is
   * kept whatever its finish time, and an unfinished one whatever its age. A match goes with its job,
   * so idempotency stays whole: a request for it is a 404, never a second job for a match that has one.
   */
  async prune(cutoff: string, nowMs = Date.now()): Promise<number> {
    const outsideWindow = new Date(nowMs - QUOTA_WINDOW_MS).toISOString();
    let total = 0;
    for (const state of ['completed', 'failed'] as const) {
      for (let deleted = PRUNE_CHUNK; deleted === PRUNE_CHUNK;) {
        deleted = await this.database.transaction(async (trx) => {
          const jobs = await trx
            .selectFrom('enrichment_jobs')
            .select(['id', 'match_id'])
            .where('state', '=', state)
            .where('finished_at', '<', cutoff)
            .where('enqueued_at', '<=', outsideWindow)
            .orderBy('id')
            .limit(PRUNE_CHUNK)
            .execute();
          if (!jobs.length) return 0;
          // The matches first: their row locks make a request for one wait (PostgreSQL), then find it gone.
          const matches = await trx
            .deleteFrom('matches')
            .where(
              'id',
              'in',
              jobs.map((job) => job.match_id),
            )
            .executeTakeFirst();
          await trx
            .deleteFrom('enrichment_jobs')
            .where(
              'id',
              'in',
              jobs.map((job) => job.id),
            )
            .execute();
          total += Number(matches.numDeletedRows);
          return jobs.length;
        });
        total += deleted;
      }
    }
    for (let deleted = PRUNE_CHUNK; deleted === PRUNE_CHUNK;) {
      const result = await this.database.write((db) =>
        db
          .deleteFrom('matches')
          .where('id', 'in', (eb) =>
            eb
              .selectFrom('matches')
              .select('id')
              .where('enrichment_requested_at', 'is', null)
              .where('status', 'in', ['completed', 'cancelled'])
              .where('created_at', '<', cutoff)
              .limit(PRUNE_CHUNK),
          )
          // Again on the row itself: on PostgreSQL a request that claimed the match meanwhile keeps it.
          .where('enrichment_requested_at', 'is', null)
          .executeTakeFirst(),
      );
      deleted = Number(result.numDeletedRows);
      total += deleted;
    }
    return total;
  }

  async depth(): Promise<number> {
    const row = await this.database.db
      .selectFrom('enrichment_jobs')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('state', 'in', ['queued', 'running'])
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  async heartbeat(workerId: string): Promise<void> {
    const at = now();
    await this.database.write((db) =>
      db
        .insertInto('workers')
        .values({ id: workerId, heartbeat_at: at })
        .onConflict((oc) => oc.column('id').doUpdateSet({ heartbeat_at: at }))
        .execute(),
    );
  }

  async retire(workerId: string): Promise<void> {
    await this.database.write((db) => db.deleteFrom('workers').where('id', '=', workerId).execute());
  }

  /**
   * Claims the oldest runnable job: queued and due, or running with an expired lease (its worker
   * died). PostgreSQL skips rows other workers hold (FOR UPDATE SKIP LOCKED); SQLite's write lock
   * serializes claims. The claim counts an attempt.
   */
  claim(workerId: string): Promise<Job | null> {
    return this.database.transaction(async (trx) => {
      const at = now();
      const oldest = (query: SelectQueryBuilder<Schema, 'enrichment_jobs', { id: number }>) =>
        (this.database.dialect === 'postgres' ? query.forUpdate().skipLocked() : query).orderBy('id').limit(1).executeTakeFirst();
      // Two index walks in id order: as one OR query SQLite gathers and sorts every queued job to find the first.
      const due = await oldest(trx.selectFrom('enrichment_jobs').select('id').where('state', '=', 'queued').where('run_after', '<=', at));
      const abandoned = await oldest(trx.selectFrom('enrichment_jobs').select('id').where('state', '=', 'running').where('lease_expires_at', '<', at));
      const candidate = due && abandoned ? (due.id < abandoned.id ? due : abandoned) : (due ?? abandoned);
      if (!candidate) return null;
      const job = await trx
        .updateTable('enrichment_jobs')
        .set((eb) => ({
          state: 'running',
          lease_owner: workerId,
          lease_expires_at: new Date(Date.now() + this.options.leaseMs).toISOString(),
          attempts: eb('attempts', '+', 1),
          started_at: at,
        }))
        .where('id', '=', candidate.id)
        .returning(['id', 'match_id', 'bot_id', 'state', 'attempts', 'lease_owner'])
        .executeTakeFirstOrThrow();
      await trx.updateTable('matches').set({ enrichment_status: 'running' }).where('id', '=', job.match_id).execute();
      return { ...job, id: Number(job.id) };
    });
  }

  /** Extends the lease of a job this worker still owns; false when it lost the job. */
  renewLease(job: Job, workerId: string): Promise<boolean> {
    return this.updateOwned(this.database.db, job, workerId, { lease_expires_at: new Date(Date.now() + this.options.leaseMs).toISOString() });
  }

  /**
   * Changes a job only while `workerId` still holds its lease; false when another worker took it over
   * (the lease expired), so a worker that lost its job writes nothing.
   */
  private async updateOwned(db: Db, job: Job, workerId: string, changes: Updateable<EnrichmentJobsTable>): Promise<boolean> {
    const result = await db
      .updateTable('enrichment_jobs')
      .set(changes)
      .where('id', '=', job.id)
      .where('lease_owner', '=', workerId)
      .where('state', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async readReplay(matchId: string): Promise<unknown> {
    const match = await this.database.db.selectFrom('matches').select('replay').where('id', '=', matchId).executeTakeFirst();
    return match?.replay ? JSON.parse(match.replay) : null;
  }

  /** Finishes a job this worker owns (a worker whose lease was taken over writes nothing). */
  complete(job: Job, workerId: string, commentary: string): Promise<boolean> {
    return this.events.write(async (trx, emit) => {
      const at = now();
      const owned = await this.updateOwned(trx, job, workerId, {
        state: 'completed',
        finished_at: at,
        lease_owner: null,
        lease_expires_at: null,
        last_error: null,
      });
      if (!owned) return false;
      await trx
        .updateTable('matches')
        .set({ enrichment_status: 'completed', commentary, enrichment_error: null, enrichment_completed_at: at })
        .where('id', '=', job.match_id)
        .execute();
      emit('enrichment.completed', { detail: { match_id: job.match_id, bot_id: job.bot_id, job_id: job.id, attempts: job.attempts } });
      return true;
    });
  }

  /** Records a failed attempt: back to the queue with a delay, or failed for good after MAX_ATTEMPTS. */
  fail(job: Job, workerId: string, error: string): Promise<JobState | null> {
    return this.events.write(async (trx, emit) => {
      const final = job.attempts >= MAX_ATTEMPTS;
      const at = now();
      const owned = await this.updateOwned(
        trx,
        job,
        workerId,
        final
          ? { state: 'failed', finished_at: at, lease_owner: null, lease_expires_at: null, last_error: error }
          : {
              state: 'queued',
              run_after: new Date(Date.now() + retryDelayMs(job.attempts, this.options.retryBaseMs)).toISOString(),
              lease_owner: null,
              lease_expires_at: null,
              last_error: error,
            },
      );
      if (!owned) return null;
      await trx
        .updateTable('matches')
        .set(final ? { enrichment_status: 'failed', enrichment_error: error, enrichment_completed_at: at } : { enrichment_status: 'queued' })
        .where('id', '=', job.match_id)
        .execute();
      if (final) {
        emit('enrichment.failed', {
          severity: 'warning',
          detail: { match_id: job.match_id, bot_id: job.bot_id, job_id: job.id, attempts: job.attempts, error },
        });
      }
      return final ? 'failed' : 'queued';
    });
  }
}
