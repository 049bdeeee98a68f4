import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import type { CheckpointFailure } from './checkpointer.js';

/**
 * The checkpointer's thread (checkpointer.ts): a connection of its own, a passive checkpoint per tick.
 * It writes each checkpoint's duration into `lastSeconds` (shared memory: no message per tick) and
 * posts each failure to the main thread, which logs and counts it.
 */
const { file, intervalMs, lastSeconds } = workerData as { file: string; intervalMs: number; lastSeconds: Float64Array };
const database = new BetterSqlite3(file);
database.pragma('busy_timeout = 1000');

const timer = setInterval(() => {
  const started = performance.now();
  try {
    database.pragma('wal_checkpoint(PASSIVE)');
    lastSeconds[0] = (performance.now() - started) / 1000;
  } catch (error) {
    // The next tick tries again, and the writer's own WAL limit is the backstop.
    const { message, code } = error as { message: string; code?: string };
    parentPort!.postMessage({ message, code } satisfies CheckpointFailure);
  }
}, intervalMs);

parentPort!.once('message', () => {
  clearInterval(timer);
  database.close();
  parentPort!.close();
});
