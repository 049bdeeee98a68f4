import { Worker } from 'node:worker_threads';

const INTERVAL_MS = 100;

export interface Checkpointer {
  /** Stops the thread after it closed its connection. */
  stop(): Promise<void>;
}

/**
 * SQLite WAL checkpoints on a worker thread with a connection of its own: copying committed pages
 * from the WAL into the database file then runs on another core instead of inside whichever commit
 * crossed the WAL size limit (under load, half of what the event loop spent committing). A passive
 * checkpoint never blocks the writer. Under sustained load commits outrun any checkpoint, so the WAL
 * still grows to the writer's own limit, whose checkpoint then finds most pages already copied; the
 * same limit takes over entirely should the thread fail.
 */
export function startCheckpointer(file: string): Checkpointer {
  const worker = new Worker(new URL('./checkpointer-thread.js', import.meta.url), { workerData: { file, intervalMs: INTERVAL_MS } });
  worker.unref();
  worker.on('error', () => {});
  let exited = false;
  const exit = new Promise<void>((resolve) =>
    worker.once('exit', () => {
      exited = true;
      resolve();
    }),
  );
  return {
    async stop() {
      if (exited) return;
      worker.ref(); // keeps the process alive until the thread has closed its connection
      worker.postMessage('stop');
      await exit;
    },
  };
}
