import type { Insertable } from 'kysely';
import type { Db } from './database.js';
import type { Schema } from './schema.js';
import { slugify } from '../ids.js';

type IdTable = 'persons' | 'zones' | 'bots' | 'matches' | 'api_tokens';

/** How many ids `uniqueId` asks about at once: the slug and its first 63 suffixes. */
const ID_BATCH = 64;

/** A new id for `table`: the slug of `name`, with `-2`, `-3`... appended until it is free. */
export async function uniqueId(trx: Db, table: IdTable, name: string, fallback: string): Promise<string> {
  const base = slugify(name, fallback);
  // Asked by equality over the key, a batch at a time: a prefix match reads no index on either database
  // (SQLite's LIKE ignores case; PostgreSQL's depends on the collation).
  for (let first = 1; ; first += ID_BATCH) {
    const candidates = Array.from({ length: ID_BATCH }, (_, index) => (first + index === 1 ? base : `${base}-${first + index}`));
    const taken = new Set((await trx.selectFrom(table).select('id').where('id', 'in', candidates).execute()).map((row) => row.id));
    const free = candidates.find((candidate) => !taken.has(candidate));
    if (free !== undefined) return free;
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
