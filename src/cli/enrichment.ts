import { pino } from 'pino';
import type { Config } from '../config.js';
import { SCHEMA_VERSION } from '../db/index.js';
import { VERSION } from '../version.js';
import { openInstallation } from '../ops/index.js';
import { createEventPipeline } from '../pipeline.js';
import { createEnrichment } from '../enrichment/index.js';
import { loggerOptions } from '../http/index.js';

/** `mothership worker`: a standalone enrichment worker against the configured database, until SIGTERM/SIGINT. */
export async function workerCommand(config: Config, lookalikes: string | null): Promise<void> {
  const log = pino(loggerOptions(config.logLevel, config.logFormat) as object);
  if (lookalikes) log.warn(lookalikes);
  const { database, box } = await openInstallation(config);
  const migrated = database.migrationReport();
  if (migrated) log.info(migrated);
  // The same pipeline as the server's: the worker's events get their webhook outbox rows too.
  const enrichment = createEnrichment({ config, database, events: createEventPipeline(database, box).events, box, metrics: null, log });
  const worker = enrichment.newWorker();
  await worker.start();
  log.info({ worker: worker.id, version: VERSION, schema: SCHEMA_VERSION }, `enrichment worker of Mothership ${VERSION} (schema ${SCHEMA_VERSION}) started`);
  // The process's timers are unref'd (a server lives by its listening socket), and PostgreSQL's pool
  // holds no socket once the server ends its idle connection: with nothing left to wait on, the worker
  // exited 0, leaving its jobs queued and a supervisor's Restart=on-failure satisfied. This holds it.
  const running = setInterval(() => {}, 2 ** 31 - 1);
  const stop = async () => {
    clearInterval(running);
    await worker.stop();
    await database.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
}
