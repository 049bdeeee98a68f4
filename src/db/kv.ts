import { createHash } from 'node:crypto';
import { sql, type RawBuilder } from 'kysely';
import type { Database, Db } from './database.js';
import { now } from './database.js';

/** The `settings` table as a JSON key/value store (system mode, fall state, integration settings). */
export async function getSetting<T>(trx: Db, key: string): Promise<T | undefined> {
  const row = await trx.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  return row ? (JSON.parse(row.value) as T) : undefined;
}

/** Writes a setting; returns its `settingFingerprint`. */
export async function putSetting(trx: Db, key: string, value: unknown): Promise<string> {
  const text = JSON.stringify(value);
  const at = now();
  await trx
    .insertInto('settings')
    .values({ key, value: text, updated_at: at })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value: text, updated_at: at }))
    .execute();
  return settingFingerprint(text);
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

/** The `settingFingerprint` of a setting as stored now ('' when it never was written). */
export async function storedSettingFingerprint(trx: Db, key: string): Promise<string> {
  return settingFingerprint((await trx.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst())?.value);
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
