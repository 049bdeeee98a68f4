import { Worker } from 'node:worker_threads';

const INTERVAL_MS = 100;
/** After a look that found no commit, the next comes this much later; after the second, the WAL is cut back. */
export const QUIET_INTERVAL_MS = 1000;
/**
 * Once the WAL is at rest, the thread looks this seldom: each wake-up of an idle process costs about
 * as much as the look itself (bench/README.md, idle), and the first commit after a pause is copied
 * (and synced to disk) this late.
 */
export const IDLE_INTERVAL_MS = 5000;

/** What the thread reports when a checkpoint fails (or the thread itself does). */
export interface CheckpointFailure {
  message: string;
  /** SQLite's error code, when SQLite raised it (SQLITE_IOERR, SQLITE_NOTADB...). */
  code?: string;
}

/** What the thread is started with. */
export interface CheckpointerOptions {
  intervalMs: number;
  quietIntervalMs: number;
  idleIntervalMs: number;
  /** The WAL file's size at rest: a larger one is cut back once the writes pause. */
  restBytes: number;
}

export interface Checkpointer {
  /** Failed checkpoints since the start (a thread that died counts as one), and the last one's duration. */
  stats(): { failures: number; lastSeconds: number };
  /** Calls `listener` with each failure from now on; returns the unsubscribe. */
  onFailure(listener: (failure: CheckpointFailure) => void): () => void;
  /** Stops the thread after it closed its connection. */
  stop(): Promise<void>;
}

/**
 * SQLite WAL checkpoints on a worker thread with a connection of its own: copying committed pages
 * from the WAL into the database file then runs on another core instead of inside whichever commit
 * crossed the WAL size limit. A passive checkpoint never blocks the writer. Under sustained load
 * commits outrun any checkpoint, so the WAL still grows to the writer's own limit, whose checkpoint
 * then finds most pages already copied; the same limit takes over entirely should the thread fail.
 * Once the writes pause, the thread also cuts the WAL file back to nothing when it is larger than
 * `restBytes`, so a burst does not leave it at its high-water mark.
 * Failures are reported, not retried faster: each tick is a new attempt.
 */
export function startCheckpointer(file: string, restBytes: number): Checkpointer {
  const lastSeconds = new Float64Array(new SharedArrayBuffer(Float64Array.BYTES_PER_ELEMENT));
  const options: CheckpointerOptions = { intervalMs: INTERVAL_MS, quietIntervalMs: QUIET_INTERVAL_MS, idleIntervalMs: IDLE_INTERVAL_MS, restBytes };
  const worker = new Worker(new URL('./checkpointer-thread.js', import.meta.url), { workerData: { file, ...options, lastSeconds } });
  worker.unref();
  let failures = 0;
  const listeners = new Set<(failure: CheckpointFailure) => void>();
  const fail = (failure: CheckpointFailure) => {
    failures++;
    for (const listener of listeners) listener(failure);
  };
  worker.on('message', (failure: CheckpointFailure) => fail(failure));
  // The thread died (its connection could not open): only the writer's WAL limit checkpoints now.
  worker.on('error', (error: Error & { code?: string }) => fail({ message: `checkpointer thread stopped: ${error.message}`, code: error.code }));
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    worker.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  return {
    stats: () => ({ failures, lastSeconds: lastSeconds[0]! }),
    onFailure(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async stop() {
      if (exited) return;
      worker.ref(); // keeps the process alive until the thread has closed its connection
      worker.postMessage('stop');
      await exit;
    },
  };
}
