import { createHash } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import type { Database, Db } from './database.js';
import { now } from './database.js';

/** The `settings` table as a JSON key/value store (system mode, fall state, integration settings). */
export async function getSetting<T>(trx: Db, key: string): Promise<T | undefined> {
  const row = await trx.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  return row ? (JSON.parse(row.value) as T) : undefined;
}

/** A setting as written: its `updated_at` (what a watcher compares) and its value's `settingFingerprint`. */
export interface WrittenSetting {
  updatedAt: string;
  fingerprint: string;
}

/** Writes a setting. */
export async function putSetting(trx: Db, key: string, value: unknown): Promise<WrittenSetting> {
  const text = JSON.stringify(value);
  const at = now();
  await trx
    .insertInto('settings')
    .values({ key, value: text, updated_at: at })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value: text, updated_at: at }))
    .execute();
  return { updatedAt: at, fingerprint: settingFingerprint(text) };
}

/**
 * Which stored value a view was read from ('' when the setting was never written): unlike
 * `updated_at`, two saves in the same millisecond differ in it. Not a secret's digest: only compared.
 */
export const settingFingerprint = (text: string | undefined): string => (text === undefined ? '' : createHash('md5').update(text).digest('hex'));

/**
 * PostgreSQL: whether the setting is still the one of `fingerprint`, as an expression (what
 * `settingFingerprint` computes, in SQL). It locks the row `for share` once `first` holds, and so reads
 * the version committed last even when that is newer than the statement's snapshot.
 */
export const isStoredSetting = (key: string, fingerprint: string, first: RawBuilder<boolean>): RawBuilder<boolean> =>
  sql<boolean>`coalesce((select md5(value) from settings where key = ${key} and ${first} for share), '') = ${fingerprint}`;

/** When a setting was last written; null when it never was. */
export async function settingUpdatedAt(trx: Db, key: string): Promise<string | null> {
  return (await trx.selectFrom('settings').select('updated_at').where('key', '=', key).executeTakeFirst())?.updated_at ?? null;
}

/**
 * Claims this interval's run of an installation-wide task (the health report): true for the one
 * process, among every instance on the database, whose tick comes first once `intervalMs` (less a
 * tenth, so a tick that fires a little early still counts) has passed since the last claimed run.
 * A compare-and-set on the row's time: on PostgreSQL the second of two concurrent claims waits for
 * the first and then finds the time already moved. If the claiming instance dies, another one
 * claims at its next tick.
 */
export async function claimInterval(database: Database, task: string, intervalMs: number, nowMs = Date.now()): Promise<boolean> {
  const key = `schedule.${task}`;
  const due = new Date(nowMs - intervalMs * 0.9).toISOString();
  return database.write(async (db) => {
    await db
      .insertInto('settings')
      .values({ key, value: 'null', updated_at: new Date(0).toISOString() })
      .onConflict((oc) => oc.column('key').doNothing())
      .execute();
    const claimed = await db
      .updateTable('settings')
      .set({ updated_at: new Date(nowMs).toISOString() })
      .where('key', '=', key)
      .where('updated_at', '<=', due)
      .executeTakeFirst();
    return Number(claimed.numUpdatedRows) === 1;
  });
}
