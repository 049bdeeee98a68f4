import { closeSync, openSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';

/** A second `serve` on a DATA_DIR whose SQLite database another one serves. */
export class ServeLockError extends Error {}

/**
 * SQLite is one serving process: a second `serve` on the same DATA_DIR answered beside the first and
 * took its MQTT connection over (both "owned" it). `serve` holds DATA_DIR/serve.lock, an SQLite file in
 * exclusive locking mode, for its life; the operating system releases it when the process ends,
 * however it ends. A standalone worker or the CLI takes no such lock: they share the database by design.
 */
export function holdServeLock(dataDir: string): { release(): void } {
  const file = path.join(dataDir, 'serve.lock');
  // Private like the other files in DATA_DIR (SQLite would create it world-readable).
  closeSync(openSync(file, 'a', 0o600));
  const lock = new BetterSqlite3(file, { timeout: 0 });
  try {
    // The journal in memory: no serve.lock-journal left beside it.
    lock.pragma('journal_mode = MEMORY');
    lock.pragma('locking_mode = EXCLUSIVE');
    // A write takes the exclusive lock, which this locking mode then keeps.
    lock.exec('begin exclusive; create table if not exists serving (since text); commit');
  } catch (error) {
    lock.close();
    if ((error as { code?: string }).code !== 'SQLITE_BUSY') throw error;
    throw new ServeLockError(
      `Another mothership serve is running on DATA_DIR ${dataDir}: SQLite is one process. Stop it first, or run several instances on PostgreSQL (DATABASE_URL).`,
    );
  }
  return { release: () => lock.close() };
}
