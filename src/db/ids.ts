import type { Db } from './database.js';
import { slugify } from '../ids.js';

type IdTable = 'persons' | 'zones' | 'bots' | 'matches';

/** A new id for `table`: the slug of `name`, with `-2`, `-3`... appended until it is free. */
export async function uniqueId(trx: Db, table: IdTable, name: string, fallback: string): Promise<string> {
  const base = slugify(name, fallback);
  const taken = new Set(
    (await trx.selectFrom(table).select('id').where('id', 'like', `${base}%`).execute()).map((row) => row.id),
  );
  if (!taken.has(base)) return base;
  for (let suffix = 2; ; suffix++) {
    const candidate = `${base}-${suffix}`;
    if (!taken.has(candidate)) return candidate;
  }
}
