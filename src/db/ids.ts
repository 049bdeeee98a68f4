import type { Insertable } from 'kysely';
import type { Db } from './database.js';
import type { Schema } from './schema.js';
import { slugify } from '../ids.js';

type IdTable = 'persons' | 'zones' | 'bots' | 'matches' | 'api_tokens';

/** A new id for `table`: the slug of `name`, with `-2`, `-3`... appended until it is free. */
export async function uniqueId(trx: Db, table: IdTable, name: string, fallback: string): Promise<string> {
  const base = slugify(name, fallback);
  const taken = new Set((await trx.selectFrom(table).select('id').where('id', 'like', `${base}%`).execute()).map((row) => row.id));
  if (!taken.has(base)) return base;
  for (let suffix = 2; ; suffix++) {
    const candidate = `${base}-${suffix}`;
    if (!taken.has(candidate)) return candidate;
  }
}

/**
 * Inserts `row(id)` and answers the id: `chosen` when the caller chose one (null when it is taken:
 * a 409 for the caller), else `derive()`, asked again while the id it gives is taken. The insert
 * decides (`on conflict do nothing`), not a read before it: requests at once can all find an id
 * free, but only one insert gets it. On PostgreSQL a conflicting insert waits for the row's
 * transaction, so the next `derive()` (a new statement) sees it and moves on to the next suffix.
 */
export async function insertWithNewId<T extends IdTable>(
  trx: Db,
  table: T,
  chosen: string | undefined,
  derive: () => Promise<string>,
  row: (id: string) => Insertable<Schema[T]>,
): Promise<string | null> {
  for (;;) {
    const id = chosen ?? (await derive());
    const inserted = await trx
      .insertInto(table)
      .values(row(id))
      .onConflict((conflict) => conflict.column('id').doNothing())
      .returning('id')
      .executeTakeFirst();
    if (inserted) return id;
    if (chosen !== undefined) return null;
  }
}
