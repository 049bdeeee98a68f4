import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';

/** The checkpointer's thread (checkpointer.ts): a connection of its own, a passive checkpoint per tick. */
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
