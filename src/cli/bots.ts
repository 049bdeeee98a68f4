import { existsSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { pino } from 'pino';
import type { Config, EnvConfig } from '../config.js';
import { sqliteFile } from '../db/index.js';
import { createEnrichment } from '../enrichment/index.js';
import type { BotView, BotWithSecret } from '../enrichment/index.js';
import { openInstallation } from '../ops/index.js';
import { createEventPipeline } from '../pipeline.js';
import { DomainError } from '../errors.js';
import type { Output } from './io.js';
import { serverRequest, serverUrl, ServerError, UsageError } from './server.js';

export const BOTS_USAGE = `usage: mothership bots create NAME | list | rotate ID | delete ID [--server URL]
  --server URL (or MOTHERSHIP_SERVER): administer the bots of that running server through its API,
    with an admin token in MOTHERSHIP_TOKEN; without it, the local database of DATA_DIR/DATABASE_URL,
    which must exist already`;

/** What `mothership bots` does, against a server's API or a local database. */
export interface BotAdmin {
  /** Where the bots live, in words: said before anything is done. */
  where: string;
  create(name: string): Promise<BotWithSecret>;
  list(): Promise<BotView[]>;
  rotate(id: string): Promise<BotWithSecret & { previous_secret_expires_at: string }>;
  remove(id: string): Promise<void>;
  close(): Promise<void>;
}

const ADMIN_TOKEN = 'an admin token: the admin token of the server, or an API token of scope admin';

/** The bots of a running server, through its HTTP API. */
function serverBots(server: string, env: NodeJS.ProcessEnv): BotAdmin {
  const call = <T>(method: string, route: string, body?: unknown) =>
    serverRequest<T>(`${server}${route}`, env, { method, body: body === undefined ? undefined : JSON.stringify(body), needs: ADMIN_TOKEN });
  return {
    where: `the server ${server}`,
    create: (name) => call('POST', '/api/bots', { name }),
    list: () => call('GET', '/api/bots'),
    rotate: (id) => call('POST', `/api/bots/${encodeURIComponent(id)}/rotate-secret`),
    remove: (id) => call('DELETE', `/api/bots/${encodeURIComponent(id)}`),
    close: async () => {},
  };
}

/** What `missingLocalDatabase` tells a command that has no server to ask instead. */
export const RUN_WHERE_THE_SERVER_RUNS = 'Run it where the server runs (the same DATA_DIR and DATABASE_URL).';

/**
 * Why the local database cannot be used, or null when it can: a command run in the wrong directory
 * must not create a new data directory, database and secrets key (a secret sealed with a new key is
 * one the server cannot read). SQLite needs DATA_DIR/mothership.db; PostgreSQL needs the secrets key
 * (SECRETS_KEY or DATA_DIR/secrets-key). `hint`: what to do instead.
 */
export function missingLocalDatabase(
  config: EnvConfig,
  hint = `${RUN_WHERE_THE_SERVER_RUNS.slice(0, -1)}, or give the running server: --server URL (or MOTHERSHIP_SERVER) with MOTHERSHIP_TOKEN.`,
): string | null {
  if (!config.databaseUrl) {
    const file = sqliteFile(config.dataDir);
    return existsSync(file) ? null : `No Mothership database at ${file} (DATA_DIR=${config.dataDir}); nothing was created. ${hint}`;
  }
  if (config.given.secretsKey || existsSync(path.join(config.dataDir, 'secrets-key'))) return null;
  return `No secrets key in ${config.dataDir} (DATA_DIR) and no SECRETS_KEY: the server's key seals its stored secrets; nothing was created. ${hint}`;
}

/** The bots of the local database (the configuration's). */
export async function localBots(config: Config): Promise<BotAdmin> {
  const { database, box } = await openInstallation(config);
  const { bots } = createEnrichment({
    config,
    database,
    events: createEventPipeline(database, box).events,
    box,
    metrics: null,
    log: pino({ level: 'silent' }),
  });
  const where = config.databaseUrl
    ? `the PostgreSQL database of DATABASE_URL (DATA_DIR=${config.dataDir})`
    : `the database ${sqliteFile(config.dataDir)} (DATA_DIR=${config.dataDir})`;
  return {
    where,
    create: (name) => bots.create({ name }),
    list: () => bots.list(),
    rotate: (id) => bots.rotate(id),
    remove: (id) => bots.remove(id),
    close: () => database.close(),
  };
}

/**
 * `mothership bots create NAME | list | rotate ID | delete ID [--server URL]`: exit 0, or 2 with the
 * reason (a usage mistake, no database here, the server's refusal). A new or rotated secret is
 * printed once.
 */
export async function botsCommand(args: string[], io: Output, env: NodeJS.ProcessEnv, openLocal: () => Promise<BotAdmin>): Promise<number> {
  let admin: BotAdmin | null = null;
  try {
    let parsed;
    try {
      parsed = parseArgs({ args, allowPositionals: true, options: { server: { type: 'string' } } });
    } catch (error) {
      throw new UsageError(`${(error as Error).message}\n${BOTS_USAGE}`);
    }
    const [sub, ...rest] = parsed.positionals;
    const argument = rest.join(' ').trim();
    const needsArgument = sub === 'create' || sub === 'rotate' || sub === 'delete';
    if (!(needsArgument || sub === 'list') || needsArgument !== Boolean(argument)) throw new UsageError(BOTS_USAGE);
    const server = serverUrl(parsed.values.server, env);
    admin = server ? serverBots(server, env) : await openLocal();
    io.err(`Using ${admin.where}`);
    if (sub === 'create') {
      const bot = await admin.create(argument);
      const again = parsed.values.server ? ` --server ${parsed.values.server}` : '';
      io.out(`id: ${bot.id}\nshared_secret: ${bot.shared_secret}\n(the secret is shown only now; rotate it with: mothership bots rotate ${bot.id}${again})`);
    } else if (sub === 'rotate') {
      const bot = await admin.rotate(argument);
      io.out(
        `id: ${bot.id}\nshared_secret: ${bot.shared_secret}\n(the previous secret keeps working until ${bot.previous_secret_expires_at}; the new one is shown only now)`,
      );
    } else if (sub === 'delete') {
      await admin.remove(argument);
      io.out(`deleted bot ${argument}`);
    } else {
      const list = await admin.list();
      io.out(list.length ? list.map((bot) => `${bot.id}\t${bot.name}\tcreated ${bot.created_at}`).join('\n') : 'no bots');
    }
    return 0;
  } catch (error) {
    // A local refusal (an unknown bot id) reads like the server's.
    if (error instanceof UsageError || error instanceof ServerError || error instanceof DomainError) {
      io.err(error.message);
      return 2;
    }
    throw error;
  } finally {
    await admin?.close();
  }
}
