import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import type { CheckpointFailure } from './checkpointer.js';

/**
 * The checkpointer's thread (checkpointer.ts): a connection of its own, a passive checkpoint per tick
 * after another connection committed.
 * It writes each checkpoint's duration into `lastSeconds` (shared memory: no message per tick) and
 * posts each failure to the main thread, which logs and counts it.
 */
const { file, intervalMs, idleIntervalMs, lastSeconds } = workerData as { file: string; intervalMs: number; idleIntervalMs: number; lastSeconds: Float64Array };
const database = new BetterSqlite3(file);
database.pragma('busy_timeout = 1000');

/** Moves when another connection commits: a checkpoint only when there may be pages to copy. */
let dataVersion = -1;
let timer: NodeJS.Timeout;

function tick(): void {
  let wrote = false;
  const started = performance.now();
  try {
    const version = database.pragma('data_version', { simple: true }) as number;
    wrote = version !== dataVersion;
    dataVersion = version;
    if (wrote) {
      database.pragma('wal_checkpoint(PASSIVE)');
      lastSeconds[0] = (performance.now() - started) / 1000;
    }
  } catch (error) {
    // The next tick tries again, and the writer's own WAL limit is the backstop.
    const { message, code } = error as { message: string; code?: string };
    parentPort!.postMessage({ message, code } satisfies CheckpointFailure);
    dataVersion = -1;
  }
  // Nothing written since the last tick: the service is idle, and the thread waits longer.
  timer = setTimeout(tick, wrote ? intervalMs : idleIntervalMs);
}
tick();

parentPort!.once('message', () => {
  clearTimeout(timer);
  database.close();
  parentPort!.close();
});
