import { statSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import type { CheckpointFailure, CheckpointerOptions } from './checkpointer.js';

/**
 * The checkpointer's thread (checkpointer.ts): a connection of its own, a passive checkpoint per tick
 * after another connection committed, and the WAL file cut back once the writes pause.
 * It writes each checkpoint's duration into `lastSeconds` (shared memory: no message per tick) and
 * posts each failure to the main thread, which logs and counts it.
 */
const { file, intervalMs, quietIntervalMs, idleIntervalMs, restBytes, lastSeconds } = workerData as CheckpointerOptions & {
  file: string;
  lastSeconds: Float64Array;
};
const database = new BetterSqlite3(file);
/** How long a passive checkpoint waits for another checkpoint (the writer's own) to finish. */
const BUSY_TIMEOUT_MS = 1000;
database.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);

/** Moves when another connection commits: a checkpoint only when there may be pages to copy. */
let dataVersion = -1;
/** Whether commits since the WAL was last cut back may have left it larger than `restBytes`. */
let grown = true;
/** Ticks in a row that found no commit: the second comes a quiet interval after the last write. */
let quietTicks = 0;
let timer: NodeJS.Timeout;

/**
 * A quiet interval without writes: the WAL is copied, started over and its file truncated (a TRUNCATE
 * checkpoint, which holds a writer back while it copies what is left to copy). The writer's own
 * connection cuts the file only to the WAL's limit (database.ts): a cut to the size at rest there
 * blocked its event loop each time the WAL started over under sustained writes.
 * Returns whether the file is at rest.
 */
function cutBack(): boolean {
  let size = 0;
  try {
    size = statSync(`${file}-wal`).size;
  } catch {
    // No WAL file: nothing to cut.
  }
  if (size <= restBytes) return true;
  // Without waiting: the checkpoint holds the writer's lock while it waits for a reader to leave the
  // WAL, so a write arriving then would wait as long. A writer or a reader in the way: the next quiet
  // tick tries again.
  database.pragma('busy_timeout = 0');
  try {
    const [result] = database.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
    return result?.busy === 0;
  } finally {
    database.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
  }
}

function tick(): void {
  let wrote = false;
  const started = performance.now();
  try {
    const version = database.pragma('data_version', { simple: true }) as number;
    wrote = version !== dataVersion;
    dataVersion = version;
    quietTicks = wrote ? 0 : quietTicks + 1;
    if (wrote) {
      database.pragma('wal_checkpoint(PASSIVE)');
      lastSeconds[0] = (performance.now() - started) / 1000;
      grown = true;
    } else if (grown && quietTicks >= 2) {
      grown = !cutBack();
    }
  } catch (error) {
    // The next tick tries again, and the writer's own WAL limit is the backstop.
    const { message, code } = error as { message: string; code?: string };
    parentPort!.postMessage({ message, code } satisfies CheckpointFailure);
    dataVersion = -1;
  }
  // Nothing written since the last tick: the writes paused, and the thread waits longer; once the
  // second quiet tick has cut the WAL back, longer still.
  timer = setTimeout(tick, wrote ? intervalMs : quietTicks < 2 ? quietIntervalMs : idleIntervalMs);
}
tick();

parentPort!.once('message', () => {
  clearTimeout(timer);
  database.close();
  parentPort!.close();
});
