import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { sql, type RawBuilder } from 'kysely';
import type { Database, Db } from '../db/index.js';
import { isStoredSetting, now, PollGate, prepare, type Prepared } from '../db/index.js';
import {
  SAFETY_EVENTS,
  type AfterAppend,
  type AppendHook,
  type AppendStatementPart,
  type EventType,
  type SerializedEvent,
  type StoredEvent,
} from '../events/index.js';
import type { ThrottledLog } from '../http/index.js';
import type { Metrics } from '../ops/index.js';
import { webhookSubscribed, type SettingsStore, type WebhookTarget, type WebhookView } from '../settings/index.js';
import { pollEvery, type Poller } from '../ticks.js';

/**
 * The webhook's transactional outbox: inside an event's transaction, one pending delivery per event
 * of a subscribed type while the webhook is on (an event nobody subscribed to gets no row). It is part of writing an event in every process (see
 * `createEventPipeline`), so events a standalone worker writes are delivered like any other; the
 * dispatcher (WebhookService) of whichever process serves sends them.
 */
/** What a new delivery row holds of an answer: nothing yet. */
export const UNANSWERED = { status_code: null, error: null, duration_ms: null, attempted_at: null } as const;

/** A delivery's `webhook-id` (Standard Webhooks `msg_` form): one per event, kept by its retries and redeliveries. */
export const newWebhookId = (): string => `msg_${randomUUID().replace(/-/g, '')}`;

export class WebhookOutbox implements AppendHook {
  /** Compiled once (db/prepared.ts): it runs for every event while the webhook is on. */
  private readonly insertPending: Prepared<unknown, 'webhookId' | 'seq' | 'type' | 'url' | 'payload' | 'at'>;
  private enqueued = false;

  private readonly dialect: Database['dialect'];

  constructor(
    database: Database,
    private readonly settings: SettingsStore,
  ) {
    this.dialect = database.dialect;
    this.insertPending = prepare(database, ['webhookId', 'seq', 'type', 'url', 'payload', 'at'], (db, param) =>
      db.insertInto('webhook_deliveries').values({
        webhook_id: param('webhookId'),
        event_seq: param('seq'),
        event_type: param('type'),
        url: param('url'),
        payload: param('payload'),
        attempt: 1,
        state: 'pending',
        due_at: param('at'),
        created_at: param('at'),
        ...UNANSWERED,
      }),
    );
  }

  /**
   * Inserts the deliveries once the events are written, with the webhook's target as stored then, so
   * on PostgreSQL inside the append lock: read before it, an append waiting for its turn while the
   * webhook was enabled would commit after the save without its delivery (and out of `seq` order with
   * those that got one). On PostgreSQL the target is this instance's view of the settings, and the
   * deliveries are inserted by the events' own statement (each round trip under the lock is time every
   * other append waits), which checks the view against the stored row; only when it is not of that
   * row (or there is none yet) is the row read, in a statement of its own.
   */
  async prepare(trx: Db, events: SerializedEvent[]): Promise<AfterAppend> {
    const view = this.dialect === 'postgres' ? this.settings.webhookView() : null;
    if (!view?.fingerprint) return { written: (stored) => this.fromStoredRow(trx, stored) };
    const positions = events.flatMap((event, index) => (isDelivered(view, event) ? [index + 1] : []));
    return {
      inStatement: deliveriesInAppend(view, positions),
      written: async (stored, viewHeld) => {
        if (!viewHeld) return this.fromStoredRow(trx, stored);
        // Set only now: another append's publish while this one waited for its turn takes the flag.
        if (positions.length) this.enqueued = true;
      },
    };
  }

  private async fromStoredRow(trx: Db, events: StoredEvent[]): Promise<void> {
    const webhook = await this.settings.webhookTargetWithin(trx);
    const subscribed = events.filter((event) => isDelivered(webhook, event));
    if (subscribed.length === 0) return;
    const at = now();
    if (this.dialect === 'postgres') {
      await firstAttempts(
        webhook.url,
        at,
        sql`unnest(${subscribed.map(() => newWebhookId())}::text[], ${subscribed.map((event) => event.seq)}::bigint[],
          ${subscribed.map((event) => event.payload.event_type)}::text[], ${subscribed.map((event) => event.json)}::text[]) as pending(id, seq, type, payload)`,
      ).execute(trx);
    } else {
      for (const event of subscribed) {
        await this.insertPending.execute(trx, {
          webhookId: newWebhookId(),
          seq: event.seq,
          type: event.payload.event_type,
          url: webhook.url,
          payload: event.json,
          at,
        });
      }
    }
    this.enqueued = true;
  }

  /** Whether this process added deliveries since the last call: its dispatcher then wakes at once instead of at the next poll. */
  takeEnqueued(): boolean {
    const enqueued = this.enqueued;
    this.enqueued = false;
    return enqueued;
  }
}

/**
 * PostgreSQL: the deliveries `view` asks for (the appended events at `positions`), inserted by the append's statement if the view is of
 * the stored row, locked once the append lock is taken: the statement's snapshot is from before its
 * wait for the lock, and only a row lock reads the version a save committed during it. A save then
 * waits for the append that holds the row, which commits in its turn.
 */
function deliveriesInAppend(view: WebhookView, positions: number[]): AppendStatementPart {
  return {
    ctes: sql`
      view_held as (
        select ${isStoredSetting(view.key, view.fingerprint, sql<boolean>`exists (select from turn)`)} as held),
      view_deliveries as (${firstAttempts(
        view.url,
        now(),
        sql`(select delivery.id, appended.seq, appended.event_type as type, appended.payload
          from unnest(${positions.map(() => newWebhookId())}::text[], ${positions}::bigint[]) as delivery(id, position) join appended using (position)
          where (select held from view_held)) as pending`,
      )})`,
    answer: sql<boolean>`(select held from view_held)`,
  };
}

/** PostgreSQL: the first attempts to `url` of `pending`'s rows (id, seq, type, payload). */
const firstAttempts = (url: string, at: string, pending: RawBuilder<unknown>): RawBuilder<unknown> => sql`
  insert into webhook_deliveries (webhook_id, event_seq, event_type, url, payload, attempt, state, due_at, created_at)
  select id, seq, type, ${url}, payload, 1, 'pending', ${at}, ${at} from ${pending}`;

/** Whether `event` is due a delivery under `webhook`. */
const isDelivered = (webhook: WebhookTarget, event: SerializedEvent): boolean =>
  webhook.enabled && !!webhook.url && webhookSubscribed(webhook.event_types, event.payload.event_type);

/** How often the outbox's bound is checked. */
const BOUND_CHECK_MS = 1000;
/** The deliveries a household must get most: abandoned only once no other pending delivery is left. */
export const ABANDONED_LAST: readonly EventType[] = SAFETY_EVENTS;

/**
 * The outbox's own bound (docs/webhook.md, "When the receiver is away"): at most `pendingMax`
 * deliveries wait; beyond that the oldest are abandoned, falls last. An abandoned delivery keeps its
 * body (it can be redelivered) and is a finished attempt, deleted by retention and the storage budget
 * like any other. Nothing is refused: a receiver that is down never stops an event from being taken.
 */
export class OutboxBound {
  private poller: Poller | null = null;
  private log: FastifyBaseLogger | null = null;
  private throttledLog: ThrottledLog | null = null;
  /** The count of pending deliveries moves only with a commit. */
  private readonly gate: PollGate;

  constructor(
    private readonly database: Database,
    private readonly pendingMax: number,
    private readonly metrics: Metrics | null,
  ) {
    this.gate = new PollGate(database);
  }

  start(log: FastifyBaseLogger, throttledLog: ThrottledLog): void {
    this.log = log;
    this.throttledLog = throttledLog;
    this.poller = pollEvery(BOUND_CHECK_MS, async () => {
      if (!this.gate.due()) return;
      await this.keep()
        .then(() => this.gate.quietUntil(Infinity))
        .catch((error: Error) => this.log?.warn({ err: error }, 'webhook: bounding the pending deliveries failed'));
    });
  }

  async stop(): Promise<void> {
    await this.poller?.stop();
    this.poller = null;
  }

  /** Abandons the pending deliveries beyond `pendingMax`; returns how many. */
  async keep(): Promise<number> {
    const { count } = await this.database.db
      .selectFrom('webhook_deliveries')
      .select((eb) => eb.fn.countAll<string | number>().as('count'))
      .where('state', '=', 'pending')
      .executeTakeFirstOrThrow();
    const excess = Number(count) - this.pendingMax;
    if (excess <= 0) return 0;
    return this.abandonOldest(excess, `not sent: more than WEBHOOK_PENDING_MAX (${this.pendingMax}) deliveries were waiting`);
  }

  /** The storage budget's last resort, once nothing finished is left to delete: up to `limit` pending deliveries abandoned. */
  makeRoom(limit: number): Promise<number> {
    return this.abandonOldest(limit, 'not sent: waiting deliveries filled the storage budget (STORAGE_BUDGET_MB)');
  }

  /** Abandons up to `limit` of the oldest pending deliveries, those of ABANDONED_LAST types only when no other is left. */
  private async abandonOldest(limit: number, reason: string): Promise<number> {
    let abandoned = 0;
    for (const others of [true, false]) {
      if (abandoned >= limit) break;
      const result = await this.database.write((db) => {
        let oldest = db.selectFrom('webhook_deliveries').select('id').where('state', '=', 'pending');
        if (others) oldest = oldest.where('event_type', 'not in', ABANDONED_LAST);
        return (
          db
            .updateTable('webhook_deliveries')
            .set({ state: 'abandoned', error: reason })
            // Again in the outer statement: on PostgreSQL a dispatcher may claim one meanwhile.
            .where('state', '=', 'pending')
            .where('id', 'in', oldest.orderBy('id').limit(limit - abandoned))
            .executeTakeFirst()
        );
      });
      abandoned += Number(result.numUpdatedRows);
    }
    if (abandoned) {
      this.metrics?.webhookDeliveries.inc({ outcome: 'abandoned' }, abandoned);
      // A receiver away under a flood abandons some every second: a line a minute.
      this.throttledLog?.write(
        this.log!,
        'webhook-abandoned',
        'warn',
        { abandoned, reason },
        'webhook: pending deliveries abandoned (the receiver is not taking them)',
      );
    }
    return abandoned;
  }
}
