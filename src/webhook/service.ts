import type { FastifyBaseLogger } from 'fastify';
import { setMaxListeners } from 'node:events';
import { Webhook } from 'standardwebhooks';
import type { Database, Db, WebhookDeliveriesTable } from '../db/index.js';
import { type LogTable, now, type Param, PollGate, prepare, type Prepared, type PreparedValues, pruneOlderThan } from '../db/index.js';
import { sql, type Compilable, type Insertable, type RawBuilder, type Selectable } from 'kysely';
import { makeEvent, type EventLog } from '../events/index.js';
import type { ThrottledLog } from '../http/index.js';
import { conflict, notFound } from '../errors.js';
import type { Metrics } from '../ops/index.js';
import { webhookSigningSecrets, type SettingsStore } from '../settings/index.js';
import { truncateUtf8, WEBHOOK_LOG_BODY_LIMIT } from '../limits.js';
import { VERSION } from '../version.js';
import { postJson, type PostResult } from './http-client.js';
import { newWebhookId, UNANSWERED, type WebhookOutbox } from './outbox.js';
import { DispatchLane } from './lane.js';
import { MAX_WEBHOOK_ATTEMPTS, outcomeOf, retryDelayOf } from './policy.js';
import { pollEvery, type Poller } from '../ticks.js';

/** A delivery attempt as the log shows it; `payload`: the JSON text sent, cut at WEBHOOK_LOG_BODY_LIMIT bytes. */
export type DeliveryView = Omit<Selectable<WebhookDeliveriesTable>, 'id' | 'response_body'> & { id: number; response_body: string | null };

export interface WebhookStatus {
  last_delivery_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
}

type DeliveryRow = Selectable<WebhookDeliveriesTable>;

/** A new pending attempt of an existing delivery: same webhook-id and body; a retry goes to the same URL, a redelivery to the one configured now. */
const resendOf = (row: DeliveryRow, attempt: number, dueAt: string, url = row.url): Insertable<WebhookDeliveriesTable> => ({
  webhook_id: row.webhook_id,
  event_seq: row.event_seq,
  event_type: row.event_type,
  url,
  payload: row.payload,
  attempt,
  state: 'pending',
  due_at: dueAt,
  created_at: now(),
  ...UNANSWERED,
});

/** Rows per insert when many deliveries are queued again at once. */
const INSERT_BATCH = 50;
/** The most deliveries one "redeliver all failed" queues: a month of failures to a dead receiver is sent in rounds, not one huge write. */
export const REDELIVER_ALL_BATCH = 1000;

/** The finished attempts (states an attempt never leaves: a retry is a new row), one log per state, as the pruning helpers see them. */
export const FINISHED_DELIVERY_LOGS: LogTable[] = (['delivered', 'failed', 'retry_scheduled', 'retried', 'abandoned'] as const).map((state) => ({
  table: 'webhook_deliveries',
  key: 'id',
  time: 'created_at',
  state,
}));
const CLAIM_MARGIN_MS = 5000;
/**
 * The dispatcher's lanes, each claiming and sending on its own with its own concurrency: first
 * attempts (a new event, a redelivery) never wait behind a backlog of retries to a failing receiver.
 */
export const LANES = [
  { name: 'first', concurrency: 16 },
  { name: 'retry', concurrency: 2 },
] as const;
type LaneName = (typeof LANES)[number]['name'];

/** The attempts the retry lane sends: every attempt after the first the policy allows. */
const RETRY_ATTEMPTS = Array.from({ length: MAX_WEBHOOK_ATTEMPTS - 1 }, (_, index) => index + 2);

/**
 * A lane's due rows of one state, oldest due first, over the (state, attempt, due_at, id) index
 * (migration 024): the walk stops at the first row not due, however many retries wait behind it.
 */
export const dueDeliveries = (lane: LaneName) => (db: Db, param: Param<'state' | 'at'>) =>
  db
    .selectFrom('webhook_deliveries')
    .select('id')
    .where('state', '=', param('state'))
    .where('attempt', 'in', lane === 'first' ? [1] : RETRY_ATTEMPTS)
    .where('due_at', '<=', param('at'))
    .orderBy('due_at')
    .orderBy('id');
const ATTEMPT_FIELDS = ['id', 'claimedUntil', 'state', 'statusCode', 'error', 'durationMs', 'attemptedAt', 'responseBody'] as const;
type AttemptField = (typeof ATTEMPT_FIELDS)[number];
/**
 * An attempt's outcome written to its row, while the claim that sent it still holds the row: a
 * process that stalled past its claim deadline (a paused VM) finds the row taken over by another
 * attempt, whose result stands.
 */
const attemptRecord = (db: Db, param: Param<AttemptField>) =>
  db
    .updateTable('webhook_deliveries')
    .set({
      state: param('state'),
      status_code: param('statusCode'),
      error: param('error'),
      duration_ms: param('durationMs'),
      attempted_at: param('attemptedAt'),
      response_body: param('responseBody'),
    })
    .where('id', '=', param('id'))
    .where('state', '=', 'sending')
    .where('due_at', '=', param('claimedUntil'));
/**
 * The retry of a claimed row, copied from it, due at `dueAt`; only when `recorded` holds (the
 * attempt's own record was written: it ran first in the transaction, or it is a CTE of the statement).
 */
const retryOf = (db: Db, row: DeliveryRow, dueAt: string, recorded: Recorded) =>
  db
    .insertInto('webhook_deliveries')
    .columns(['webhook_id', 'event_seq', 'event_type', 'url', 'payload', 'attempt', 'state', 'due_at', 'created_at'])
    .expression(
      db
        .selectFrom('webhook_deliveries')
        .where('id', '=', row.id)
        .$if(recorded !== null, (query) => query.where(recorded!))
        .select([
          'webhook_id',
          'event_seq',
          'event_type',
          'url',
          'payload',
          sql<number>`attempt + 1`.as('attempt'),
          sql.lit('pending').as('state'),
          sql.val(dueAt).as('due_at'),
          sql.val(now()).as('created_at'),
        ]),
    );
/** In one statement of CTEs, the condition that the attempt's record was written; null in a transaction, where it ran first. */
type Recorded = RawBuilder<boolean> | null;
/** An attempt's record and the writes that follow from it, made only if it was written. */
interface AttemptRecord {
  values: PreparedValues<AttemptField>;
  then: ((db: Db, recorded: Recorded) => RecordWriteQuery)[];
}
/** One of the writes recording a batch of attempts (`record`). */
type RecordWriteQuery = Compilable<unknown> & { execute(): Promise<unknown> };
type RecordWrite = (db: Db) => RecordWriteQuery;
/** A claimed row and the secrets in force when it was claimed, which sign its attempt. */
interface Claimed {
  row: DeliveryRow;
  secrets: string[];
}
/** A lane's slots and its queries (compiled once: they run at least once per event sent). */
interface Lane {
  name: LaneName;
  dispatch: DispatchLane<Claimed, PostResult>;
  /** When the lane next looks for claims a process left behind (`claimDue`). */
  abandonedDueMs: number;
  anyDue: Prepared<{ id: number }, 'state' | 'at'>;
  claimDueRows: Prepared<DeliveryRow, 'state' | 'at' | 'deadline' | 'limit'>;
}
const POLL_MS = 1000;
/** How long a stop waits for attempts in flight before abandoning them (their rows are sent again after a restart). */
const STOP_GRACE_MS = 3000;

/**
 * The system webhook: a transactional outbox (a delivery row per event, written with the event) and
 * a dispatcher that sends due rows. One row per attempt; a retry is a new row with the same
 * `webhook-id`, due WEBHOOK_RETRY_DELAY_MS later, so a pending retry survives a restart and the log
 * shows every attempt in order. Memory stays flat whatever the receiver does: the backlog is in the
 * database and at most the lanes' concurrency in requests are in flight.
 */
export class WebhookService {
  private poller: Poller | null = null;
  private abandon = new AbortController();
  private unsubscribe: (() => void) | null = null;
  private readonly lanes: Lane[];
  private readonly recordAttempt: Prepared<unknown, AttemptField>;
  /** The poll looks only after a commit or when a delivery comes due (a retry, a claim left by a process that died). */
  private readonly gate: PollGate;

  constructor(
    private readonly database: Database,
    private readonly events: EventLog,
    private readonly outbox: WebhookOutbox,
    private readonly settings: SettingsStore,
    private readonly log: FastifyBaseLogger,
    private readonly throttledLog: ThrottledLog,
    private readonly metrics: Metrics | null,
    private readonly options: {
      timeoutMs: number;
      retryDelayMs: number;
      /** Told the payloads of the copies written for retries and redeliveries (the storage budget counts them). */
      stored?: (payloads: string[]) => void;
    },
  ) {
    this.gate = new PollGate(database);
    this.lanes = LANES.map(({ name, concurrency }) => ({
      name,
      dispatch: new DispatchLane<Claimed, PostResult>(concurrency, {
        claim: (limit) => this.claimDue(this.laneNamed(name), limit),
        send: async ({ row, secrets }) => {
          const result = await this.send(row.url, row.webhook_id, row.payload, row.event_type, secrets);
          return this.abandon.signal.aborted ? null : result;
        },
        record: (answered) => this.record(answered.map(({ row: { row }, answer }) => ({ row, result: answer }))),
        release: (claimed) => this.release(claimed.map(({ row }) => row)),
        failed: (error) => this.log.warn({ err: error, lane: name }, 'webhook dispatch failed'),
      }),
      abandonedDueMs: 0,
      anyDue: prepare(database, ['state', 'at'], (db, param) => dueDeliveries(name)(db, param).limit(1)),
      claimDueRows: prepare(database, ['state', 'at', 'deadline', 'limit'], (db, param) =>
        db
          .updateTable('webhook_deliveries')
          .set({ state: 'sending', due_at: param('deadline') })
          .where('id', 'in', () => {
            const oldest = dueDeliveries(name)(db, param).limit(param('limit'));
            return database.dialect === 'postgres' ? oldest.forUpdate().skipLocked() : oldest;
          })
          .returningAll(),
      ),
    }));
    this.recordAttempt = prepare(database, ATTEMPT_FIELDS, attemptRecord);
  }

  start(): void {
    this.abandon = new AbortController();
    // Every attempt in flight listens to it (every lane's, and the Test button's): not a leak past Node's 10.
    setMaxListeners(0, this.abandon.signal);
    for (const lane of this.lanes) lane.dispatch.start();
    // Wake at once for events whose outbox rows this process wrote; the poll covers retries and other processes.
    // New rows are first attempts: only that lane needs waking.
    this.unsubscribe = this.events.subscribe(() => {
      if (this.outbox.takeEnqueued()) this.laneNamed('first').dispatch.kick();
    });
    this.poller = pollEvery(POLL_MS, () => this.poll());
    this.kick();
  }

  async stop(): Promise<void> {
    this.unsubscribe?.();
    this.unsubscribe = null;
    await this.poller?.stop();
    this.poller = null;
    // A slow receiver must not hold up a shutdown for WEBHOOK_TIMEOUT_MS: after a short grace the
    // attempts are abandoned unrecorded and their rows put back (see release).
    const grace = setTimeout(() => this.abandon.abort(), STOP_GRACE_MS);
    await Promise.all(this.lanes.map((lane) => lane.dispatch.stop()));
    clearTimeout(grace);
  }

  private laneNamed(name: LaneName): Lane {
    return this.lanes.find((lane) => lane.name === name)!;
  }

  private async poll(): Promise<void> {
    if (!this.gate.due()) return;
    this.kick();
    // A failed read leaves the poll running every tick.
    await this.gate.quietUntilNext(() => this.nextDue()).catch(() => {});
  }

  /** When the next delivery comes due (a retry, a claim left by a process that died), in ms; Infinity when none waits. */
  private async nextDue(): Promise<number> {
    const next = await this.database.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.min('due_at').as('due_at'))
      .where('state', 'in', ['pending', 'sending'])
      .executeTakeFirst();
    return next?.due_at ? Date.parse(String(next.due_at)) : Infinity;
  }

  /** Rows may be due: each lane's free slots look for them. */
  kick(): void {
    for (const lane of this.lanes) lane.dispatch.kick();
  }

  /**
   * Claims up to `limit` of the lane's due rows, moving them to `sending` with a deadline: a process
   * that dies mid-send leaves them to be claimed again after it (at-least-once), and two instances
   * never send the same row (PostgreSQL skips rows another instance is claiming). Pending rows first,
   * then abandoned `sending` ones, each one statement walking its state in index order (a single query
   * over both states sorts every pending row). On SQLite an UPDATE that finds nothing still costs a
   * write transaction, so a read comes first (figures in bench/README.md).
   */
  private async claimDue(lane: Lane, limit: number): Promise<Claimed[]> {
    const at = now();
    const deadline = this.sendingDeadline();
    const claim = async (state: 'pending' | 'sending', limit: number): Promise<DeliveryRow[]> => {
      // SQLite: most calls find nothing due, and a read says so cheaply. The claim itself joins the
      // group commit instead of paying a commit of its own. PostgreSQL: a claim that finds nothing is
      // one round trip too, as the read would be.
      if (this.database.dialect === 'sqlite' && (await lane.anyDue.execute(this.database.db, { state, at })).rows.length === 0) return [];
      return (await this.database.write((db) => lane.claimDueRows.execute(db, { state, at, deadline, limit }))).rows;
    };
    const rows = await claim('pending', limit);
    // Claims a process left behind (`sending` past their deadline) are rare: looked for once a poll
    // period, not after every delivery (the poll keeps coming due while one waits: nextDue).
    if (rows.length < limit && Date.now() >= lane.abandonedDueMs) {
      lane.abandonedDueMs = Date.now() + POLL_MS;
      rows.push(...(await claim('sending', limit - rows.length)));
    }
    if (!rows.length) return [];
    const secrets = webhookSigningSecrets((await this.settings.current()).webhook, Date.now());
    return rows.sort((a, b) => Number(a.id) - Number(b.id)).map((row) => ({ row, secrets }));
  }

  /**
   * Puts abandoned attempts back to `pending`, due now: the next process sends them at once rather
   * than after their claim deadline. The receiver may have seen one already; it is sent again with
   * the same webhook-id (at-least-once).
   */
  private async release(rows: DeliveryRow[]): Promise<void> {
    if (!rows.length) return;
    // Only rows still under this process's claims: one another instance took over is its to send.
    await this.database.write((db) =>
      db
        .updateTable('webhook_deliveries')
        .set({ state: 'pending', due_at: now() })
        .where('state', '=', 'sending')
        .where((eb) => eb.or(rows.map((row) => eb.and([eb('id', '=', row.id), eb('due_at', '=', row.due_at)]))))
        .execute(),
    );
  }

  /**
   * A row in `sending` is reclaimed after this: by then its attempt cannot still run anywhere, nor
   * its answer wait to be recorded. A claimed row waits for a free slot at most one attempt, takes
   * one, and its answer waits for the lane's next claim at most one more (DispatchLane).
   */
  private sendingDeadline(): string {
    return new Date(Date.now() + 3 * this.options.timeoutMs + CLAIM_MARGIN_MS).toISOString();
  }

  /**
   * Records a batch of attempts in one transaction, scheduling the retries the policy asks for. A
   * receiver that answered 410 Gone gets nothing more: its other pending deliveries fail with that
   * reason (each can be redelivered once the URL is fixed) and the webhook is switched off.
   */
  private async record(outcomes: { row: DeliveryRow; result: PostResult }[]): Promise<void> {
    const attemptedAt = now();
    let nextRetryMs = Infinity;
    const gone = new Set<string>();
    const copies: string[] = [];
    const attempts: AttemptRecord[] = [];
    const afterwards: (() => void)[] = [];
    const goneWrites: RecordWrite[] = [];
    for (const { row, result } of outcomes) {
      const outcome = outcomeOf(result, row.attempt);
      const then: AttemptRecord['then'] = [];
      const values: PreparedValues<AttemptField> = {
        id: row.id,
        claimedUntil: row.due_at,
        state: outcome === 'delivered' ? 'delivered' : outcome === 'retry' ? 'retry_scheduled' : 'failed',
        statusCode: result.statusCode,
        error: result.error,
        durationMs: result.durationMs,
        attemptedAt,
        responseBody: result.responseBody,
      };
      attempts.push({ values, then });
      // The attempt this one retried has its answer now: it no longer waits for a retry.
      if (row.attempt > 1)
        then.push((db, recorded) =>
          db
            .updateTable('webhook_deliveries')
            .set({ state: 'retried' })
            .where('webhook_id', '=', row.webhook_id)
            .where('state', '=', 'retry_scheduled')
            .where('attempt', '=', row.attempt - 1)
            .where('id', '<', row.id)
            .$if(recorded !== null, (query) => query.where(recorded!)),
        );
      const delayMs = outcome === 'retry' ? retryDelayOf(result, this.options.retryDelayMs) : Infinity;
      if (outcome === 'retry') {
        const dueAt = new Date(Date.now() + delayMs).toISOString();
        then.push((db, recorded) => retryOf(db, row, dueAt, recorded));
      }
      if (outcome === 'gone') gone.add(row.url);
      this.metrics?.webhookDuration.observe(result.durationMs / 1000);
      // What follows from the attempt's record, once it is known to be written (writeRecord).
      afterwards.push(() => {
        this.metrics?.webhookDeliveries.inc({ outcome });
        if (outcome !== 'retry') return;
        nextRetryMs = Math.min(nextRetryMs, delayMs);
        copies.push(row.payload);
        // Once per delivery of a flood to a failing receiver: a line a minute per URL (the attempts are in the delivery log).
        this.throttledLog.write(
          this.log,
          `webhook-retry:${row.url}`,
          'info',
          { delivery: row.id, status: result.statusCode, error: result.error, retryInMs: delayMs },
          'webhook attempt failed; retry scheduled',
        );
      });
    }
    for (const url of gone)
      goneWrites.push((db) =>
        db
          .updateTable('webhook_deliveries')
          .set({ state: 'failed', error: 'not sent: the receiver answered 410 Gone' })
          .where('state', '=', 'pending')
          .where('url', '=', url),
      );
    const written = await this.writeRecord(attempts, goneWrites);
    written.forEach((recorded, index) => {
      if (recorded) afterwards[index]!();
      // Paused past its claim deadline, this process sent an attempt another has taken over since.
      else
        this.throttledLog.write(
          this.log,
          'webhook-superseded',
          'info',
          { delivery: outcomes[index]!.row.id },
          'webhook attempt answered after another instance took the delivery over: its result is not recorded',
        );
    });
    if (copies.length) this.options.stored?.(copies);
    for (const url of gone) {
      if (await this.settings.disableWebhook(url, `The receiver answered 410 Gone at ${attemptedAt}; enable the webhook again once the URL is fixed`)) {
        this.log.warn({ url }, 'webhook receiver answered 410 Gone; webhook switched off');
      }
    }
    if (nextRetryMs < Infinity) setTimeout(() => this.kick(), nextRetryMs + 10).unref();
  }

  /**
   * Writes a batch's record at once. An attempt's record holds only while its row is still under the
   * claim that sent it (attemptRecord), and its retry and the mark on the attempt it retried are
   * written only if the record was. A delivery sent on its own and answered is one statement, which
   * needs no transaction. On PostgreSQL more are one statement too, each write a data-modifying CTE
   * (round trips were most of the dispatcher's cost against a failing receiver), each dependent write
   * conditioned on its attempt's CTE (`returning`): they see the table as the statement began, not
   * each other's changes. A 410's failing of the pending rows must see the retries written before it,
   * so that batch is a transaction, as on SQLite. Resolves with whether each attempt's record was written.
   */
  private async writeRecord(attempts: AttemptRecord[], goneWrites: RecordWrite[]): Promise<boolean[]> {
    if (attempts.length === 1 && attempts[0]!.then.length === 0 && goneWrites.length === 0) {
      const { numAffectedRows } = await this.database.write((db) => this.recordAttempt.execute(db, attempts[0]!.values));
      return [(numAffectedRows ?? 0n) > 0n];
    }
    if (this.database.dialect === 'postgres' && goneWrites.length === 0) {
      const { rows } = await this.database.write((db) => {
        const parts = attempts.flatMap(({ values, then }, index) => {
          const attempt = sql.ref(`attempt${index}`);
          const recorded = sql<boolean>`exists (select 1 from ${attempt})`;
          return [
            sql`${attempt} as (${attemptRecord(db, (name) => values[name]).returning('id')})`,
            ...then.map((write, step) => sql`${sql.ref(`then${index}_${step}`)} as (${write(db, recorded)})`),
          ];
        });
        // Which attempts' records were written, by their place in the batch.
        const written = attempts.map((_attempt, index) => sql`select ${sql.lit(index)} as written from ${sql.ref(`attempt${index}`)}`);
        return sql<{ written: number }>`with ${sql.join(parts)} ${sql.join(written, sql` union all `)}`.execute(db);
      });
      const written = new Set(rows.map((row) => Number(row.written)));
      return attempts.map((_attempt, index) => written.has(index));
    }
    return this.database.transaction(async (trx) => {
      const written: boolean[] = [];
      for (const { values, then } of attempts) {
        const { numUpdatedRows } = await attemptRecord(trx, (name) => values[name]).executeTakeFirstOrThrow();
        written.push(numUpdatedRows > 0n);
        if (numUpdatedRows > 0n) for (const write of then) await write(trx, null).execute();
      }
      for (const write of goneWrites) await write(trx).execute();
      return written;
    });
  }

  /** Signs (Standard Webhooks: one signature per secret, space-separated) and POSTs the exact payload bytes. */
  private send(url: string, webhookId: string, payload: string, eventType: string, secrets: string[], detailed = true): Promise<PostResult> {
    const timestamp = new Date();
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'user-agent': `mothership/${VERSION}`,
      'x-service-event': eventType,
      'webhook-id': webhookId,
      'webhook-timestamp': String(Math.floor(timestamp.getTime() / 1000)),
    };
    if (secrets.length) headers['webhook-signature'] = secrets.map((secret) => new Webhook(secret).sign(webhookId, timestamp, payload)).join(' ');
    return postJson(url, payload, headers, this.options.timeoutMs, detailed, this.abandon.signal);
  }

  /**
   * The settings page's Test: a real `webhook.test` delivery to the candidate URL and secret, logged
   * like any other, answered with its outcome (no retry: the person is waiting for the answer).
   */
  async test(candidate: { url: string; secrets: string[] }, { detailed }: { detailed: boolean }): Promise<PostResult & { ok: boolean }> {
    const payload = JSON.stringify(makeEvent('webhook.test', { detail: { message: 'Test delivery from Mothership' } }));
    const webhookId = newWebhookId();
    const at = now();
    const claimedUntil = this.sendingDeadline();
    const { id } = await this.database.write((db) =>
      db
        .insertInto('webhook_deliveries')
        // In `sending` until answered, with the deadline a claimed row gets: the dispatcher must not take
        // it for an abandoned attempt and send it a second time.
        .values({
          webhook_id: webhookId,
          event_seq: null,
          event_type: 'webhook.test',
          url: candidate.url,
          payload,
          attempt: 1,
          state: 'sending',
          due_at: claimedUntil,
          created_at: at,
          ...UNANSWERED,
        })
        .returning('id')
        .executeTakeFirstOrThrow(),
    );
    const result = await this.send(candidate.url, webhookId, payload, 'webhook.test', candidate.secrets, detailed);
    const ok = outcomeOf(result, 1) === 'delivered';
    const { statusCode, error, durationMs, responseBody } = result;
    const state = ok ? 'delivered' : 'failed';
    await this.database.write((db) =>
      this.recordAttempt.execute(db, { id, claimedUntil, state, statusCode, error, durationMs, attemptedAt: now(), responseBody }),
    );
    this.metrics?.webhookDeliveries.inc({ outcome: ok ? 'delivered' : 'failed' });
    return { ...result, ok };
  }

  /**
   * Sends a logged delivery again, now, as a new first attempt with the same webhook-id and body, to
   * the URL configured now: the person asking has usually just fixed it.
   */
  async redeliver(id: number): Promise<DeliveryView> {
    const row = await this.database.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound('Delivery', String(id));
    const { url } = (await this.settings.get()).webhook;
    if (!url) throw conflict('No webhook URL is configured: save one before redelivering');
    const { id: newId } = await this.database.write((db) =>
      db
        .insertInto('webhook_deliveries')
        .values(resendOf(row, 1, now(), url))
        .returning('id')
        .executeTakeFirstOrThrow(),
    );
    this.options.stored?.([row.payload]);
    this.kick();
    return this.get(Number(newId));
  }

  /**
   * Sends every delivery whose last attempt failed again, as `redeliver` does one: those not sent
   * again since (a failure redelivered once is not queued twice), oldest first, at most
   * REDELIVER_ALL_BATCH per call. Answers how many were queued.
   */
  async redeliverFailed(): Promise<number> {
    const { url } = (await this.settings.get()).webhook;
    if (!url) throw conflict('No webhook URL is configured: save one before redelivering');
    const at = now();
    const queued = await this.database.write(async (db) => {
      const failed = await db
        .selectFrom('webhook_deliveries as d')
        .selectAll('d')
        .where('d.state', '=', 'failed')
        .where(({ not, exists, selectFrom }) =>
          not(
            exists(
              selectFrom('webhook_deliveries as later').select('later.id').whereRef('later.webhook_id', '=', 'd.webhook_id').whereRef('later.id', '>', 'd.id'),
            ),
          ),
        )
        .orderBy('d.id')
        .limit(REDELIVER_ALL_BATCH)
        .execute();
      for (let start = 0; start < failed.length; start += INSERT_BATCH)
        await db
          .insertInto('webhook_deliveries')
          .values(failed.slice(start, start + INSERT_BATCH).map((row) => resendOf(row, 1, at, url)))
          .execute();
      return failed.map((row) => row.payload);
    });
    this.options.stored?.(queued);
    if (queued.length) this.kick();
    return queued.length;
  }

  async get(id: number): Promise<DeliveryView> {
    const row = await this.database.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound('Delivery', String(id));
    return toView(row);
  }

  /**
   * Deletes finished attempts (delivered, failed, or followed by their retry) from before `cutoff`
   * (retention; ISO 8601); returns how many. An attempt still pending or sending is kept whatever its age.
   */
  async prune(cutoff: string): Promise<number> {
    let deleted = 0;
    for (const log of FINISHED_DELIVERY_LOGS) deleted += await pruneOlderThan(this.database, log, cutoff);
    return deleted;
  }

  /**
   * The `limit` attempts written last, optionally of one state and one event type, newest attempt
   * first: a retry's row is written when it is scheduled but sent later, so the page is ordered by
   * when each attempt was made (one not made yet: when it is due).
   */
  async list(filter: DeliveryFilter): Promise<DeliveryView[]> {
    const rows = (await deliveryLogQuery(this.database.db, filter).execute()).map(toView);
    const at = (row: DeliveryView) => row.attempted_at ?? row.due_at;
    return rows.sort((a, b) => (at(a) === at(b) ? b.id - a.id : at(a) < at(b) ? 1 : -1));
  }

  /**
   * The last attempt of the webhook saved at `url`. A Test of another URL is left out: it tried
   * values not saved, and must not paint the saved webhook red (or green).
   */
  async status(url: string): Promise<WebhookStatus> {
    const last = await this.database.db
      .selectFrom('webhook_deliveries')
      .select(['attempted_at', 'status_code', 'error'])
      .where('attempted_at', 'is not', null)
      .where((eb) => eb.or([eb('event_type', '!=', 'webhook.test'), eb('url', '=', url)]))
      .orderBy('attempted_at', 'desc')
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    return { last_delivery_at: last?.attempted_at ?? null, last_status_code: last?.status_code ?? null, last_error: last?.error ?? null };
  }

  async backlog(): Promise<number> {
    const row = await this.database.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('state', 'in', ['pending', 'sending'])
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }
}

export interface DeliveryFilter {
  limit: number;
  state?: DeliveryView['state'];
  event_type?: string;
}

/** The delivery log's read, newest first: each filter walks an index in id order (migrations 004 and 016), never the whole log. */
export function deliveryLogQuery(db: Db, { limit, state, event_type: eventType }: DeliveryFilter) {
  let query = db.selectFrom('webhook_deliveries').selectAll().orderBy('id', 'desc').limit(limit);
  if (state) query = query.where('state', '=', state);
  if (eventType) query = query.where('event_type', '=', eventType);
  return query;
}

function toView(row: DeliveryRow): DeliveryView {
  return {
    ...row,
    id: Number(row.id),
    event_seq: row.event_seq === null ? null : Number(row.event_seq),
    payload: truncateUtf8(row.payload, WEBHOOK_LOG_BODY_LIMIT),
    response_body: row.response_body ?? null,
  };
}
