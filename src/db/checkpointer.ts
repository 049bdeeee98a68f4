import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';

/**
 * SQLite WAL checkpoints on a worker thread, with a connection of its own: copying committed pages
 * from the WAL into the database file then runs on another core instead of inside whichever commit
 * crossed the WAL size limit (under load, half of what the event loop spent committing). A passive
 * checkpoint never blocks the writer; the writer restarts the WAL once everything is copied.
 */
const { file, intervalMs } = workerData as { file: string; intervalMs: number };
const database = new BetterSqlite3(file);
database.pragma('busy_timeout = 1000');

const timer = setInterval(() => {
  try {
    database.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Busy or interrupted: the next tick tries again, and the writer's own limit is the backstop.
  }
}, intervalMs);

parentPort!.once('message', () => {
  clearInterval(timer);
  database.close();
  parentPort!.close();
});
