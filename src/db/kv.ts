import type { Db } from './index.js';
import { now } from './index.js';

/** The `settings` table as a JSON key/value store (system mode, fall state, integration settings). */
export async function getSetting<T>(trx: Db, key: string): Promise<T | undefined> {
  const row = await trx.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  return row ? (JSON.parse(row.value) as T) : undefined;
}

export async function putSetting(trx: Db, key: string, value: unknown): Promise<void> {
  const text = JSON.stringify(value);
  const at = now();
  await trx
    .insertInto('settings')
    .values({ key, value: text, updated_at: at })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value: text, updated_at: at }))
    .execute();
}
