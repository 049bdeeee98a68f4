import { hash, randomUUID } from 'node:crypto';
import { getSetting, now, putSetting, type Database } from '../db/index.js';

/** Rows per statement: well under SQLite's and PostgreSQL's limits on bound parameters. */
const CHUNK = 500;
/** The settings key of the generation the broker's marker must carry for the record to hold there. */
const GENERATION_KEY = 'mqtt.retained_generation';

/** A short digest of a retained payload: the record compares payloads by it (one-shot: no Hash object per message). */
export const payloadHash = (payload: string): string => hash('sha256', payload, 'base64url').slice(0, 22);

/** What the broker holds: topic -> payload hash, null while the content is in doubt. */
export type Held = Map<string, string | null>;

/**
 * The record (table `mqtt_retained`) of every topic the MQTT owner published retained and not yet
 * cleared. Clearing what should no longer exist is this record minus what should exist, so it does
 * not depend on reading the broker's retained messages back (a broker drops what exceeds a client's
 * queue). A topic is written as in doubt before it is published and gets its hash once the broker
 * acknowledged it, so a crash in between leaves it known to exist but never wrongly "unchanged".
 */
export class RetainedRecord {
  constructor(private readonly database: Database) {}

  async load(): Promise<Held> {
    const rows = await this.database.db.selectFrom('mqtt_retained').select(['topic', 'payload_hash']).execute();
    return new Map(rows.map((row) => [row.topic, row.payload_hash]));
  }

  /** Writes hashes (null: in doubt) and forgets cleared topics. */
  async write(entries: Iterable<[topic: string, hash: string | null]>, cleared: Iterable<string> = []): Promise<void> {
    const rows = [...entries];
    const gone = [...cleared];
    if (rows.length === 0 && gone.length === 0) return;
    const at = now();
    await this.database.transaction(async (db) => {
      for (let start = 0; start < rows.length; start += CHUNK) {
        const values = rows.slice(start, start + CHUNK).map(([topic, payload_hash]) => ({ topic, payload_hash, updated_at: at }));
        await db
          .insertInto('mqtt_retained')
          .values(values)
          .onConflict((oc) => oc.column('topic').doUpdateSet((eb) => ({ payload_hash: eb.ref('excluded.payload_hash'), updated_at: at })))
          .execute();
      }
      for (let start = 0; start < gone.length; start += CHUNK)
        await db
          .deleteFrom('mqtt_retained')
          .where('topic', 'in', gone.slice(start, start + CHUNK))
          .execute();
    });
  }

  /** Every hash in doubt (the broker lost what it held, or it is another broker); returns the new generation. */
  async forgetContents(): Promise<string> {
    const generation = randomUUID();
    await this.database.transaction(async (db) => {
      await db.updateTable('mqtt_retained').set({ payload_hash: null, updated_at: now() }).execute();
      await putSetting(db, GENERATION_KEY, generation);
    });
    return generation;
  }

  /** The generation whose marker on the broker says the broker still holds what the record says. */
  async generation(): Promise<string | null> {
    return (await getSetting<string>(this.database.db, GENERATION_KEY)) ?? null;
  }
}
