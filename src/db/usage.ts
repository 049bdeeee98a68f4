import { sql } from 'kysely';
import type { Database, Db } from './database.js';
import { prepare, type Prepared } from './prepared.js';

/** SQLite's pages in use, compiled once per database (prepared.ts): the budget measures with every append. */
const pagesInUse = new WeakMap<Database, Prepared<{ bytes: number }>>();

/**
 * The bytes the storage budget counts, cheaply (no scan): on SQLite the database's pages in use
 * (page_count - freelist_count, times page_size: the logs are nearly all of it, and deleted rows free
 * their pages at once) less the baseline rows as migration 030 counts them (BASELINE_STORAGE_MB
 * bounds those) plus the most its WAL file takes (set aside, not measured: deleting rows writes to
 * the WAL, so chasing its size would delete ever more); on PostgreSQL the two logs' rows as counted
 * by migration 016's triggers. `db`: a transaction's handle measures with its own writes (on SQLite
 * the pages they take, however SQLite lays them out).
 */
export async function storageBytes(database: Database, db: Db = database.db): Promise<number> {
  if (database.dialect === 'postgres') {
    const { rows } = await sql<{ bytes: string | number | null }>`select sum(bytes) as bytes from log_usage`.execute(db);
    return Number(rows[0]?.bytes ?? 0);
  }
  let pages = pagesInUse.get(database);
  if (!pages) {
    pages = prepare(database, [], (kysely) => ({
      compile: () =>
        sql<{ bytes: number }>`
          select (p.page_count - f.freelist_count) * s.page_size - (select bytes from baseline_usage where id = 1) as bytes
          from pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s`.compile(kysely),
    }));
    pagesInUse.set(database, pages);
  }
  const { rows } = await pages.execute(db, {});
  return Number(rows[0]!.bytes) + database.walReserveBytes;
}
