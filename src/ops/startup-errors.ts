import type { Redis } from 'ioredis';
import type { Config } from '../config.js';
import { statfsSync } from 'node:fs';
import { ServeLockError, sqliteFile, storageFailure, UnknownSchemaError } from '../db/index.js';

/** A start-up failure in one sentence; `passes`: its cause may go away on its own (a database restarting), so a supervisor should start the service again. */
export interface StartupFailure {
  sentence: string;
  passes: boolean;
}

/**
 * Start-up failures a person can fix, or that pass on their own, in one sentence each (the port,
 * the database, a schema from another release), instead of a stack trace; null for anything else,
 * which is a bug and keeps its stack.
 */
export function startupFailure(error: unknown, config: Pick<Config, 'databaseUrl' | 'dataDir' | 'host' | 'port'>): StartupFailure | null {
  const sentence = startupSentence(error, config);
  if (sentence === null) return null;
  const code = (error as { code?: unknown } | null)?.code;
  // Space freed, PostgreSQL back: a supervisor's next start succeeds.
  const passes = config.databaseUrl === null ? code === 'ENOSPC' || storageFailure(error) !== null : typeof code === 'string' && POSTGRES_AWAY.has(code);
  return { sentence, passes };
}

function startupSentence(error: unknown, config: Pick<Config, 'databaseUrl' | 'dataDir' | 'host' | 'port'>): string | null {
  if (error instanceof UnknownSchemaError || error instanceof ServeLockError) return error.message;
  const { code, syscall } = (error ?? {}) as { code?: string; syscall?: string };
  // Listening on a HOST that is neither an address nor a name the resolver knows.
  if (syscall === 'getaddrinfo' && (error as { hostname?: string }).hostname === config.host) {
    return `HOST ${config.host} is not an address of this machine: set HOST to one of its addresses (or 0.0.0.0).`;
  }
  if (syscall === 'listen') {
    if (code === 'EADDRINUSE') return `Port ${config.port} on ${config.host} is already in use: stop the other process or set PORT to a free port.`;
    if (code === 'EACCES') return `Not allowed to listen on port ${config.port}: ports below 1024 need privileges; set PORT to 1024 or above.`;
    if (code === 'EADDRNOTAVAIL') return `HOST ${config.host} is not an address of this machine: set HOST to one of its addresses (or 0.0.0.0).`;
  }
  if (config.databaseUrl) {
    const where = serviceTarget(config.databaseUrl, 5432, '/');
    const reason = POSTGRES_REASONS[code ?? ''];
    if (reason) return `Cannot use the PostgreSQL database ${where} (DATABASE_URL): ${reason}${reason.endsWith('?') ? '' : '.'}`;
  } else if (code === 'EACCES' || code === 'EROFS' || code === 'SQLITE_CANTOPEN' || code === 'SQLITE_READONLY') {
    return `Cannot write the SQLite database in ${config.dataDir} (DATA_DIR): permission denied or read-only.`;
  } else if (code === 'ENOSPC' || storageFailure(error)) {
    // A full disk often reaches SQLite as an I/O error (mapping the WAL index: SQLITE_IOERR_SHMSIZE).
    const full = code === 'ENOSPC' || code === 'SQLITE_FULL' || freeBytes(config.dataDir) < FULL_BELOW_BYTES;
    return `Cannot write the SQLite database in ${config.dataDir} (DATA_DIR): ${full ? 'the disk is full; free space and start again' : `a disk I/O error (${code}); check the disk`}.`;
  } else if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') {
    return `The SQLite database ${sqliteFile(config.dataDir)} (DATA_DIR) is damaged or not a SQLite database: restore it from a backup (docs/operations.md).`;
  }
  return null;
}

/** Free space below which a disk counts as full (SQLite needs a few pages, its WAL and its index to start). */
const FULL_BELOW_BYTES = 1024 * 1024;

function freeBytes(dir: string): number {
  try {
    const stats = statfsSync(dir);
    return stats.bavail * stats.bsize;
  } catch {
    return Infinity;
  }
}

/** PostgreSQL away for now: not running yet, restarting, out of connections, or a network or DNS hiccup. */
const POSTGRES_AWAY = new Set(['ECONNREFUSED', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', '53300', '57P03']);

const POSTGRES_REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused; is PostgreSQL running on that host and port?',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found (DNS did not answer)',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  '28P01': 'the password was refused',
  '28000': 'the server refused this user or client address (pg_hba.conf)',
  '3D000': 'the database does not exist; create it first (createdb)',
  '42501': 'the user may not create tables in it',
  '53300': 'the server has no free connections',
  '57P03': 'the server is starting up or shutting down; try again shortly',
};

/** host:port/database of a connection URL: never its user or password. */
export function serviceTarget(url: string, defaultPort: number, defaultPath: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.hostname || 'localhost'}:${parsed.port || defaultPort}${parsed.pathname.length > 1 ? parsed.pathname : defaultPath}`;
  } catch {
    return '(unreadable URL)';
  }
}

/** The database number REDIS_URL names (its path; 0 without one): config.ts has checked it is a number. */
const redisDatabase = (redisUrl: string): number => Number(new URL(redisUrl).pathname.slice(1) || 0);

/** Redis's refusal of SELECT for a database number beyond its `databases` setting. */
const isMissingDatabase = (error: unknown): boolean => /DB index is out of range/i.test((error as Error | null)?.message ?? '');

/**
 * Whether the Redis server lacks the database REDIS_URL names: the sentence saying so, or null (it
 * has it, or cannot be asked now). ioredis selects the database on connecting, and when the server
 * refuses it only emits an error and goes on in database 0, which other installations may use.
 */
export async function missingRedisDatabase(redis: Redis, redisUrl: string): Promise<string | null> {
  const database = redisDatabase(redisUrl);
  if (database === 0 || redis.status !== 'ready') return null;
  try {
    await redis.select(database);
    return null;
  } catch (error) {
    if (!isMissingDatabase(error)) return null;
    // CONFIG may be refused (a managed Redis, an ACL): the sentence then goes without the range.
    const count = await redis.config('GET', 'databases').then(
      (reply) => Number((reply as string[])[1]),
      () => Number.NaN,
    );
    const has = Number.isInteger(count) && count > 0 ? ` (it has 0 to ${count - 1})` : '';
    const target = serviceTarget(redisUrl, 6379, '/0').replace(/\/[^/]*$/, '');
    return `REDIS_URL names database ${database}, which the Redis server at ${target} does not have${has}: use one of its databases, or raise its \`databases\` setting.`;
  }
}

/**
 * Readiness's Redis probe: selects REDIS_URL's database where ping would not notice its absence (the
 * connection would have stayed in database 0).
 */
export function redisProbe(redis: Redis, redisUrl: string): Promise<unknown> {
  const database = redisDatabase(redisUrl);
  return database === 0 ? redis.ping() : redis.select(database);
}

const REDIS_REASONS: Record<string, string> = {
  ECONNREFUSED: 'connection refused; is Redis running on that host and port?',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host not found (DNS did not answer)',
  ETIMEDOUT: 'the connection timed out',
  EHOSTUNREACH: 'the host is unreachable',
  ECONNRESET: 'the connection was reset (TLS expected, or not Redis?)',
  WRONGPASS: 'the user or password was refused',
  NOAUTH: 'the server requires a password',
};

/**
 * Why Redis (REDIS_URL) does not answer, in one sentence naming its host and port and never the
 * URL's credentials: what ioredis reports is a stack without the address.
 */
export function redisUnreachable(error: unknown, redisUrl: string): string {
  const { code, message } = (error ?? {}) as { code?: string; message?: string };
  // ioredis gives a refused AUTH no code: its reply starts with the error name.
  if (isMissingDatabase(error))
    return `Redis ${serviceTarget(redisUrl, 6379, '/0')} (REDIS_URL): the server has no database ${redisDatabase(redisUrl)}; the service uses database 0 until it is fixed`;
  const reason = REDIS_REASONS[code ?? ''] ?? REDIS_REASONS[/^[A-Z]+/.exec(message ?? '')?.[0] ?? ''] ?? 'no answer';
  return `Redis ${serviceTarget(redisUrl, 6379, '/0')} (REDIS_URL) is unreachable: ${reason}`;
}
