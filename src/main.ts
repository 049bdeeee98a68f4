#!/usr/bin/env node
import { networkInterfaces } from 'node:os';
import { loadConfig, lookalikeVariables, prepareDataDir, takeUnshownTokenMark, ConfigError, type Config } from './config.js';
import { buildApp } from './app.js';
import {
  botsCommand,
  compareCommand,
  historyCommand,
  localBots,
  missingLocalDatabase,
  mqttCleanupCommand,
  pushCommand,
  RUN_WHERE_THE_SERVER_RUNS,
  UsageError,
  validateCommand,
  workerCommand,
} from './cli/index.js';
import { startupFailure } from './ops/index.js';
import { holdServeLock, SCHEMA_VERSION } from './db/index.js';
import { VERSION } from './version.js';

/** The longest a shutdown may take; every step of it is bounded well below this (see app.close). */
const SHUTDOWN_DEADLINE_MS = 20_000;

/** The environment, validated first; only then DATA_DIR is created and completed. */
const configure = () => prepareDataDir(loadConfig(process.env));

const io = { out: (line: string) => console.log(line), err: (line: string) => console.error(line) };

/** A mistyped variable is ignored by the validation (it is not ours): said once, when a command reads the environment. */
const lookalikes = lookalikeVariables(process.env);
const warnLookalikes = () => {
  if (lookalikes) io.err(lookalikes);
};

const USAGE = `Usage:
  mothership serve                                   HTTP API, dashboard, integrations, embedded worker
  mothership worker                                  standalone enrichment worker
  mothership baseline validate FILE...               exit 1 when any file is not a valid baseline record
  mothership baseline compare BASE HEAD [--threshold PCT] [--format table|json|markdown]
  mothership baseline push FILE --server URL [--threshold PCT] [--format ...]
                                                     record a run on a server (token: MOTHERSHIP_TOKEN);
                                                     exit 1 when it regressed, 2 on an error
  mothership baseline history --server URL [--limit N] [--format ...]
  mothership bots create NAME | list | rotate ID | delete ID [--server URL]
                                                     administer bots: on a running server (--server or
                                                     MOTHERSHIP_SERVER, token: MOTHERSHIP_TOKEN), else in
                                                     the existing local database; prints a new secret once
  mothership mqtt cleanup --installation ID          clears what a previous installation id left retained on the broker
  mothership --version                               the release and the database schema it migrates to`;

async function serve(): Promise<void> {
  const config = configure();
  // Before anything opens the database: a second serve is refused before it migrates or listens.
  let serveLock: ReturnType<typeof holdServeLock> | null = null;
  try {
    if (config.databaseUrl === null) serveLock = holdServeLock(config.dataDir);
  } catch (error) {
    explainStartup(config)(error);
  }
  const app = await buildApp(config).catch(explainStartup(config));
  if (lookalikes) app.http.log.warn(lookalikes);
  await app.start();
  const address = await app.http.listen({ port: config.port, host: config.host }).catch(async (error: unknown) => {
    await app.close();
    return explainStartup(config)(error);
  });
  app.http.log.info({ version: VERSION, schema: SCHEMA_VERSION }, `Mothership ${VERSION} (schema ${SCHEMA_VERSION}) listening on ${address}`);
  if (config.adminTokenUnshown) {
    const mark = takeUnshownTokenMark(config);
    if (mark.show) app.http.log.warn(firstStartMessage(address, config));
    if (mark.kept) app.http.log.warn(`${config.dataDir}/admin-token.unshown cannot be removed: the next start shows the admin token again`);
  }
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      app.http.log.warn({ signal }, 'second signal: exiting without finishing the shutdown');
      process.exit(1);
    }
    stopping = true;
    app.http.log.info({ signal }, 'shutting down');
    // Nothing acknowledged lives only in memory (events, deliveries and jobs are rows): a shutdown that
    // cannot finish in time gives up rather than keep the process (and its broker session) alive.
    setTimeout(() => {
      app.http.log.error(`shutdown did not finish within ${SHUTDOWN_DEADLINE_MS / 1000} s: exiting`);
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS).unref();
    await app.close();
    // Held until here (a lock the garbage collector closed would let a second serve in).
    serveLock?.release();
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

/**
 * What a person needs after the very first start, in plain words: where to open the dashboard and
 * how to sign in. The token is shown this once (it was just generated); afterwards it lives only in
 * DATA_DIR/admin-token.
 */
function firstStartMessage(address: string, config: Config): string {
  const url = address.replace('://0.0.0.0', '://localhost').replace('://[::]', '://localhost');
  // On every interface the address above is loopback's: a phone on the network opens the host's own.
  const lan = ['0.0.0.0', '::'].includes(config.host)
    ? Object.values(networkInterfaces())
        .flat()
        .filter((entry) => entry && !entry.internal && entry.family === 'IPv4')
        .map((entry) => `http://${entry!.address}:${new URL(address).port}/`)
    : [];
  const elsewhere = lan.length ? ` (from another device on the network: ${lan.join(' or ')})` : '';
  return `First start: open ${url}/ in a browser${elsewhere} and sign in with the admin token ${config.adminToken} (kept in ${config.dataDir}/admin-token; it is not shown again), then add a user with a password for each person on the Users page. API clients send the token as "Authorization: Bearer <token>"; the API is described at ${url}/docs.`;
}

/** A failure a person can fix, or that passes on its own, becomes a StartupError with one sentence; anything else stays as it is. */
class StartupError extends Error {
  constructor(
    message: string,
    readonly passes: boolean,
  ) {
    super(message);
  }
}
const explainStartup =
  (config: Config) =>
  (error: unknown): never => {
    const failure = startupFailure(error, config);
    throw failure ? new StartupError(failure.sentence, failure.passes) : error;
  };

async function main(argv: string[]): Promise<number> {
  const [command] = argv;
  switch (command) {
    case 'serve':
    case undefined:
      await serve();
      return -1;
    case 'worker': {
      const config = configure();
      await workerCommand(config, lookalikes).catch(explainStartup(config));
      return -1;
    }
    case 'bots':
      warnLookalikes();
      return botsCommand(argv.slice(1), io, process.env, async () => {
        // Never a new DATA_DIR or database here: the command was perhaps run in the wrong directory.
        const envConfig = loadConfig(process.env);
        const missing = missingLocalDatabase(envConfig);
        if (missing) throw new UsageError(missing);
        const config = prepareDataDir(envConfig);
        return localBots(config).catch(explainStartup(config));
      });
    case 'mqtt':
      warnLookalikes();
      if (argv[1] === 'cleanup' && argv[2] === '--installation' && argv[3]) {
        // The broker is in the server's settings: a new DATA_DIR would have none, and a new installation id.
        const envConfig = loadConfig(process.env);
        const missing = missingLocalDatabase(envConfig, RUN_WHERE_THE_SERVER_RUNS);
        if (missing) {
          console.error(missing);
          return 2;
        }
        const config = prepareDataDir(envConfig);
        return mqttCleanupCommand(config, argv[3], io).catch(explainStartup(config));
      }
      console.error('usage: mothership mqtt cleanup --installation ID');
      return 2;
    case 'baseline': {
      const [sub, ...rest] = argv.slice(1);
      if (sub === 'validate') return validateCommand(rest, io);
      if (sub === 'compare') return compareCommand(rest, io);
      if (sub === 'push' || sub === 'history') warnLookalikes();
      if (sub === 'push') return pushCommand(rest, io, process.env);
      if (sub === 'history') return historyCommand(rest, io, process.env);
      console.error(USAGE);
      return 2;
    }
    case '--version':
    case '-v':
    case 'version':
      console.log(`mothership ${VERSION} (schema ${SCHEMA_VERSION})`);
      return 0;
    case '--help':
    case '-h':
    case 'help':
      console.log(USAGE);
      return 0;
    default:
      console.error(`Unknown command "${command}"\n\n${USAGE}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof StartupError) console.error(error.message);
    else console.error(error instanceof ConfigError ? `Configuration error: ${error.message}` : error);
    // 2: a person must fix the start (deployment.md's unit does not restart it); 1: it may pass, start again.
    process.exit(error instanceof ConfigError || (error instanceof StartupError && !error.passes) ? 2 : 1);
  },
);
