import { closeSync, constants, existsSync, fstatSync, openSync } from 'node:fs';
import path from 'node:path';
import BetterSqlite3 from 'better-sqlite3';

/** A second `serve` on a DATA_DIR whose SQLite database another one serves, or a lock file that cannot be one. */
export class ServeLockError extends Error {}

/** Failures of the whole directory (a full disk, a read-only file system): the database's sentence says them better. */
const DIRECTORY_FAILURES = new Set(['ENOSPC', 'EROFS', 'SQLITE_FULL']);

/**
 * SQLite is one serving process: a second `serve` on the same DATA_DIR answered beside the first and
 * took its MQTT connection over (both "owned" it). `serve` holds DATA_DIR/serve.lock, an SQLite file in
 * exclusive locking mode, for its life; the operating system releases it when the process ends,
 * however it ends. A standalone worker or the CLI takes no such lock: they share the database by design.
 */
export function holdServeLock(dataDir: string): { release(): void } {
  const file = path.join(dataDir, 'serve.lock');
  let lock: BetterSqlite3.Database | null = null;
  try {
    // Private like the other files in DATA_DIR (SQLite would create it world-readable). Only a file
    // of its own: a link (to mothership.db, it would take the database's own lock) or a FIFO (whose
    // open would wait for a reader, for ever) is refused.
    const descriptor = openSync(file, constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o600);
    try {
      const stats = fstatSync(descriptor);
      if (!stats.isFile() || stats.nlink !== 1) throw new Error('not a file of its own: a link or a special file');
    } finally {
      closeSync(descriptor);
    }
    lock = new BetterSqlite3(file, { timeout: 0 });
    // The journal in memory: no serve.lock-journal left beside it.
    lock.pragma('journal_mode = MEMORY');
    lock.pragma('locking_mode = EXCLUSIVE');
    // A write takes the exclusive lock, which this locking mode then keeps.
    lock.exec('begin exclusive; create table if not exists serving (since text); commit');
    return { release: () => lock!.close() };
  } catch (error) {
    lock?.close();
    const code = (error as { code?: string }).code ?? '';
    if (code === 'SQLITE_BUSY')
      throw new ServeLockError(
        `Another mothership serve is running on DATA_DIR ${dataDir}: SQLite is one process. Stop it first, or run several instances on PostgreSQL (DATABASE_URL).`,
      );
    // A directory that refuses a new file is the database's problem too (startup-errors says it).
    if (DIRECTORY_FAILURES.has(code) || (code === 'EACCES' && !existsSync(file))) throw error;
    throw new ServeLockError(
      `${file} cannot hold the lock of mothership serve (${(error as Error).message}): it keeps nothing, so remove it while no mothership serve runs on DATA_DIR ${dataDir}, then start again.`,
    );
  }
}
