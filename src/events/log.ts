import { sql, type RawBuilder } from 'kysely';
import type { Database, Db } from '../db/index.js';
import { EVENT_APPEND_LOCK, type LogTable, prepare, type Prepared, pruneOlderThan } from '../db/index.js';
import { makeEvent, type EventFields, type EventPayload, type EventType, type SerializedEvent, type StoredEvent } from './types.js';

type Subscriber = (event: StoredEvent) => void;
/** What an append hook does once the events are written, inside their transaction, or when the append fails before. */
export interface AfterAppend {
  /** PostgreSQL: SQL run in the append's own statement, under the append lock, with no round trip of its own. */
  inStatement?: AppendStatementPart;
  /** `answer`: the `inStatement` part's, when there was one. */
  written(stored: StoredEvent[], answer?: boolean): Promise<void>;
  /** The append failed (or another hook refused it) before or after `written`: runs at most once. */
  abandoned?(): void;
}
/**
 * PostgreSQL: what a hook adds to the append's statement (appendInTurn): CTEs that may read `turn`
 * (the append lock, taken) and `appended` (the events inserted: seq, event_type, payload, position
 * from 1), and one boolean the statement answers, which goes to the hook's `written`.
 */
export interface AppendStatementPart {
  ctes: RawBuilder<unknown>;
  answer: RawBuilder<boolean>;
}
/** Part of every append: a transactional outbox (webhook deliveries), the storage budget. */
export interface AppendHook {
  /**
   * Runs inside the appending transaction before its events are written (on PostgreSQL before the
   * append lock): may refuse them (throw) before they take any space, and returns what to do once they
   * are written, if anything. `writer`: whom the events count against (see `EventLog.write`).
   */
  prepare(trx: Db, events: SerializedEvent[], writer: string): Promise<AfterAppend | undefined>;
  /** Runs before the transaction opens: refuses at once (throws) what `prepare` would, without the transaction's cost. */
  admit?(writer: Writer): void;
}
/** Whom an append counts against in the storage budget's fair share (`EventLog.write`). */
export interface Writer {
  /** A request's token (`token:<id>`) or address; SERVICE_WRITER for what no request asked for. */
  client: string;
  /** Whether the append may hold a fall (SAFETY_EVENTS), which no fair share refuses: known before its transaction. */
  safety: boolean;
}
/** The writer of the events no request asked for (timers, sweeps, MQTT commands, the CLI). */
export const SERVICE_WRITER = 'service';
/** What it appends is not known beforehand: nothing of it is refused before the append sees its events. */
const SERVICE: Writer = { client: SERVICE_WRITER, safety: true };
/** The event log as the pruning helpers see it (retention and the storage budget). */
export const EVENT_LOG: LogTable = { table: 'events', key: 'seq', time: 'timestamp' };
export type Emit = <T extends EventType>(type: T, fields: EventFields<T>) => EventPayload<T>;

/**
 * The event log and in-process bus. A state change and the events it causes are written in one
 * transaction (`write`); only after the commit are the events handed to subscribers (MQTT, webhook,
 * dashboard stream), so an event that a client saw acknowledged is never lost, and a rolled-back
 * change never announces itself.
 */
export class EventLog {
  private readonly subscribers = new Set<Subscriber>();
  /** Compiled once (db/prepared.ts): it runs for every event. */
  private readonly insert: Prepared<{ seq: number }, 'type' | 'timestamp' | 'payload'>;

  /** `appendHooks` run inside every appending transaction: fixed at construction, so no writer can miss one (see pipeline.ts). */
  constructor(
    private readonly database: Database,
    private readonly appendHooks: readonly AppendHook[],
  ) {
    this.insert = prepare(database, ['type', 'timestamp', 'payload'], (db, param) =>
      db
        .insertInto('events')
        .values({ event_type: param('type'), timestamp: param('timestamp'), payload: param('payload') })
        .returning('seq'),
    );
  }

  /**
   * `writer`: whom the events count against in the storage budget's fair share; the service itself
   * when no request asked for them.
   */
  async write<T>(work: (trx: Db, emit: Emit) => Promise<T>, writer: Writer = SERVICE): Promise<T> {
    const pending: EventPayload[] = [];
    const emit: Emit = (type, fields) => {
      const event = makeEvent(type, fields);
      pending.push(event as EventPayload);
      return event;
    };
    for (const hook of this.appendHooks) hook.admit?.(writer);
    const stored: StoredEvent[] = [];
    const result = await this.database.transaction(async (trx) => {
      const value = await work(trx, emit);
      stored.push(...(await this.append(trx, pending, writer.client)));
      return value;
    });
    this.publish(stored);
    return result;
  }

  /** Appends one event on its own (no state change goes with it). */
  async emit<T extends EventType>(type: T, fields: EventFields<T>): Promise<EventPayload<T>> {
    return this.write(async (_trx, emit) => emit(type, fields));
  }

  private async append(trx: Db, payloads: EventPayload[], writer: string): Promise<StoredEvent[]> {
    if (payloads.length === 0) return [];
    const events = payloads.map((payload) => ({ payload, json: JSON.stringify(payload) }));
    const afterAppend: AfterAppend[] = [];
    try {
      for (const hook of this.appendHooks) {
        const after = await hook.prepare(trx, events, writer);
        if (after) afterAppend.push(after);
      }
      if (this.database.dialect === 'sqlite') {
        const stored = await this.appendEach(trx, events);
        for (const after of afterAppend) await after.written(stored);
        return stored;
      }
      const parts = afterAppend.flatMap((after) => (after.inStatement ? [after.inStatement] : []));
      const { stored, answers } = await appendInTurn(trx, events, parts);
      for (const after of afterAppend) await after.written(stored, after.inStatement && answers[parts.indexOf(after.inStatement)]);
      return stored;
    } catch (error) {
      for (const after of afterAppend) after.abandoned?.();
      throw error;
    }
  }

  /** SQLite: one writer, so its order is the commit order already; the compiled insert per event (a write emits one or two) beats building a multi-row one. */
  private async appendEach(trx: Db, events: SerializedEvent[]): Promise<StoredEvent[]> {
    const stored: StoredEvent[] = [];
    for (const { payload, json } of events) {
      const [row] = (await this.insert.execute(trx, { type: payload.event_type, timestamp: payload.timestamp, payload: json })).rows;
      stored.push({ seq: Number(row!.seq), payload, json });
    }
    return stored;
  }

  private publish(events: StoredEvent[]): void {
    for (const event of events) {
      for (const subscriber of this.subscribers) {
        try {
          subscriber(event);
        } catch {
          // A subscriber's failure must never reach the producer; each output logs its own errors.
        }
      }
    }
  }

  subscribe(subscriber: Subscriber): () => void {
    this.subscribers.add(subscriber);
    return () => this.subscribers.delete(subscriber);
  }

  /** Deletes the events from before `cutoff` (retention; ISO 8601); returns how many. */
  prune(cutoff: string): Promise<number> {
    return pruneOlderThan(this.database, EVENT_LOG, cutoff);
  }

  /** The highest sequence number in the log (0 when empty). */
  async lastSeq(): Promise<number> {
    const row = await this.database.db
      .selectFrom('events')
      .select((eb) => eb.fn.max('seq').as('seq'))
      .executeTakeFirst();
    return Number(row?.seq ?? 0);
  }

  /**
   * The events after `after` in sequence order, at most `maxEvents`, bounded in bytes: the first
   * whatever its size, then as many as keep the page's payloads within `maxBytes`. The sizes are read
   * first and only the payloads that fit are loaded, so a reader of large events holds one page of
   * bytes, not one of events.
   */
  async page(after: number, maxBytes: number, maxEvents: number): Promise<StoredEvent[]> {
    const sizes = await this.database.db
      .selectFrom('events')
      .select(['seq', sql<number | string>`octet_length(payload)`.as('bytes')])
      .where('seq', '>', after)
      .orderBy('seq')
      .limit(maxEvents)
      .execute();
    if (sizes.length === 0) return [];
    let last = Number(sizes[0]!.seq);
    let total = Number(sizes[0]!.bytes);
    for (const row of sizes.slice(1)) {
      total += Number(row.bytes);
      if (total > maxBytes) break;
      last = Number(row.seq);
    }
    const rows = await this.database.db
      .selectFrom('events')
      .select(['seq', 'payload'])
      .where('seq', '>', after)
      .where('seq', '<=', last)
      .orderBy('seq')
      .execute();
    return rows.map(stored);
  }

  /** Events after `after`, in `order`, at most `limit`; only of `types` when given (index events_by_type). */
  async history(after: number, limit: number, order: 'asc' | 'desc' = 'asc', types?: readonly string[]): Promise<StoredEvent[]> {
    let query = this.database.db.selectFrom('events').select(['seq', 'payload']).where('seq', '>', after);
    if (types?.length) query = query.where('event_type', 'in', types);
    const rows = await query.orderBy('seq', order).limit(limit).execute();
    return rows.map(stored);
  }
}

const stored = (row: { seq: number | string | bigint; payload: string }): StoredEvent => ({
  seq: Number(row.seq),
  json: row.payload,
  payload: JSON.parse(row.payload) as EventPayload,
});

/**
 * PostgreSQL: sequence numbers in commit order. Concurrent transactions would otherwise commit out of
 * `seq` order, and a reader that has seen 11 could never learn of 10 committed after it. The
 * transaction takes the append lock before its events get their numbers and keeps it until its
 * commit, so appends (and only they) take turns and the committed log is always a prefix in `seq`
 * (see readers in stream.ts). One statement takes the lock, inserts every event and runs the hooks'
 * `parts` (the webhook outbox's deliveries): each round trip here is time every other append waits.
 */
async function appendInTurn(trx: Db, events: SerializedEvent[], parts: AppendStatementPart[]): Promise<{ stored: StoredEvent[]; answers: boolean[] }> {
  const answers = parts.length ? sql`, array[${sql.join(parts.map((part) => part.answer))}] as answers` : sql``;
  const { rows } = await sql<{ seq: string | number; answers?: boolean[] }>`
    with turn as (select pg_advisory_xact_lock(${EVENT_APPEND_LOCK})),
      inserted as (
        insert into events (event_type, "timestamp", payload)
        select type, at, payload
        from turn, unnest(${events.map((event) => event.payload.event_type)}::text[], ${events.map((event) => event.payload.timestamp)}::text[], ${events.map((event) => event.json)}::text[])
            with ordinality as batch(type, at, payload, position)
        order by position
        returning seq, event_type, payload),
      -- Numbers are drawn in the order of the rows inserted, which is \`position\`'s.
      appended as (select seq, event_type, payload, row_number() over (order by seq) as position from inserted)
      ${parts.length ? sql`, ${sql.join(parts.map((part) => part.ctes))}` : sql``}
    select seq${answers} from appended order by seq`.execute(trx);
  const stored = events.map((event, index) => ({ ...event, seq: Number(rows[index]!.seq) }));
  return { stored, answers: rows[0]?.answers ?? [] };
}
