import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, linkSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { isIP } from 'node:net';
import path from 'node:path';
import envSchema from 'env-schema';
import type { ErrorObject } from 'ajv';
import { MAX_CAPACITY } from './limits.js';
import { ID_PATTERN } from './ids.js';

/** The values DATA_DIR keeps when the environment does not set them, generated on the first start. */
export interface Installation {
  adminToken: string;
  /**
   * True while the generated admin token has not been shown: the first start that listens logs it
   * once, after `takeUnshownTokenMark` (a first start that failed, its port taken, showed nothing).
   */
  adminTokenUnshown: boolean;
  mothershipId: string;
  /** 32-byte key that encrypts secrets at rest (MQTT password, webhook secret, bot secrets). */
  secretsKey: Buffer;
}

/** Everything the service reads from its environment, validated, before DATA_DIR is touched (docs/configuration.md). */
export type EnvConfig = ReturnType<typeof loadConfig>;

/** The configuration every process runs with: the environment's, completed from DATA_DIR. */
export type Config = Omit<EnvConfig, 'given'> & Installation;

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

// Each variable's `description` is the rule a bad value breaks: the error says `<NAME> must be <description>`.
const wholeNumber = (fallback: number, minimum = 0, maximum?: number) =>
  ({
    type: 'integer',
    minimum,
    ...(maximum === undefined ? {} : { maximum }),
    default: fallback,
    description: `a whole number >= ${minimum}${maximum === undefined ? '' : ` and <= ${maximum}`}`,
  }) as const;
/** Node's timers hold at most 2^31 - 1 ms (about 24.8 days); a longer one fires at once. */
const MAX_TIMER_MS = 2_147_483_647;
const milliseconds = (fallback: number, minimum = 0) => wholeNumber(fallback, minimum, MAX_TIMER_MS);
/** Retention beyond this many days would put the cutoff before the dates JavaScript can hold. */
const days = (fallback: number) => wholeNumber(fallback, 0, 100_000);
const oneOf = <T extends string>(options: readonly T[], fallback: T) =>
  ({ type: 'string', enum: options, default: fallback, description: `one of ${options.join(', ')}` }) as const;
const text = <E extends { pattern?: string; minLength?: number; default?: string }>(description: string, extra = {} as E) =>
  ({ type: 'string', description, ...extra }) as const;

const WORKERS = ['embedded', 'off'] as const;
const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** Every variable the service reads (docs/configuration.md, whose defaults test/config.unit.test.ts checks against it), as JSON Schema. */
export const ENV_SCHEMA = {
  type: 'object',
  additionalProperties: false,
  properties: {
    PORT: wholeNumber(8080, 0, 65535),
    HOST: text('a host name or address', { default: '127.0.0.1' }),
    DATA_DIR: text('a directory', { default: './data' }),
    DATABASE_URL: text('a postgres:// URL (unset means SQLite)', { pattern: '^postgres(ql)?://' }),
    DATABASE_TIMEOUT_MS: milliseconds(10_000, 1),
    HTTP_REQUEST_TIMEOUT_MS: milliseconds(30_000, 1000),
    HTTP_CONNECTIONS_PER_ADDRESS: wholeNumber(256, 0, 1_000_000),
    REDIS_URL: text('a redis:// URL', { pattern: '^rediss?://' }),
    REDIS_PREFIX: text('a string', { default: 'mothership:' }),
    ADMIN_TOKEN: text('at least 16 characters', { minLength: 16 }),
    MOTHERSHIP_ID: text(`an id matching ${ID_PATTERN}`, { pattern: ID_PATTERN.source }),
    SECRETS_KEY: text('32 bytes, base64-encoded'),
    WORKER: oneOf(WORKERS, 'embedded'),
    WEBHOOK_TIMEOUT_MS: milliseconds(15_000, 1),
    WEBHOOK_RETRY_DELAY_MS: milliseconds(30_000),
    WEBHOOK_PENDING_MAX: wholeNumber(10_000, 1, 10_000_000),
    MQTT_BACKOFF_INITIAL_MS: milliseconds(5_000, 1),
    MQTT_BACKOFF_MAX_MS: milliseconds(120_000, 1),
    MQTT_BIRTH_DELAY_MAX_MS: milliseconds(3_000),
    MQTT_TAKEOVER_SESSION_MS: milliseconds(60_000, 1),
    MQTT_TAKEOVER_BACKOFF_MS: milliseconds(300_000, 1),
    HEALTH_INTERVAL_MS: milliseconds(60_000, 1),
    NODE_TIMEOUT_MS: milliseconds(30_000, 1),
    NODE_LIMIT: wholeNumber(200, 1, 100_000),
    PERSON_LIMIT: wholeNumber(10_000, 1, 1_000_000),
    ZONE_LIMIT: wholeNumber(1_000, 1, 100_000),
    PRESENCE_AWAY_DELAY_MS: milliseconds(60_000),
    ENRICHMENT_LEASE_MS: milliseconds(300_000, 1),
    ENRICHMENT_RETRY_BASE_MS: milliseconds(1_000),
    ENRICHMENT_LLM_URL: text('an http(s) URL', { pattern: '^https?://' }),
    ENRICHMENT_LLM_MODEL: text('a model name', { default: 'gpt-4o-mini' }),
    ENRICHMENT_LLM_API_KEY: text('an API key'),
    RATE_LIMIT_CAPACITY: wholeNumber(60, 1, MAX_CAPACITY),
    // The bucket counts micro-tokens per millisecond: a slower refill would be zero.
    RATE_LIMIT_REFILL_PER_SEC: { type: 'number', minimum: 0.001, maximum: 10_000_000, default: 1, description: 'a number >= 0.001 and <= 10000000' },
    RATE_LIMIT_COSTS: text('a list of group=cost entries (cost 1 or more) separated by commas', {
      pattern: '^\\s*([a-z0-9_]+=[1-9]\\d*)?(\\s*,\\s*([a-z0-9_]+=[1-9]\\d*)?)*\\s*$',
    }),
    RATE_LIMIT_REDIS_FAILURE: oneOf(['open', 'closed'] as const, 'open'),
    EVENT_RETENTION_DAYS: days(30),
    EVENT_STREAMS_MAX: wholeNumber(500, 1),
    EVENT_STREAMS_PER_CLIENT: wholeNumber(20, 1),
    // Under a socket's 16 KiB high-water mark a full stream would never see 'drain'.
    EVENT_STREAM_BUFFER_BYTES: wholeNumber(131_072, 65_536, 1_073_741_824),
    WEBHOOK_LOG_RETENTION_DAYS: days(30),
    ENRICHMENT_RETENTION_DAYS: days(90),
    STORAGE_BUDGET_MB: wholeNumber(1024, 0, 1_000_000_000),
    BASELINE_STORAGE_MB: wholeNumber(1024, 0, 1_000_000_000),
    TRUST_PROXY: text('a comma-separated list of addresses or CIDRs'),
    CORS_ORIGINS: text('a comma-separated list of origins, each scheme://host[:port] without a path (https://ha.example.com)'),
    LOG_LEVEL: oneOf(LOG_LEVELS, 'info'),
    LOG_FORMAT: oneOf(['auto', 'json', 'pretty'] as const, 'auto'),
  },
} as const;

type Properties = typeof ENV_SCHEMA.properties;
type Variable = keyof Properties;
/** Every variable the service reads, in the order of docs/configuration.md's table. */
export const VARIABLES = Object.keys(ENV_SCHEMA.properties) as Variable[];
/** Variables the CLI reads to reach a server (src/cli/server.ts); the service itself does not. */
const CLI_VARIABLES = ['MOTHERSHIP_SERVER', 'MOTHERSHIP_TOKEN'] as const;

/**
 * Edits (insert, delete, substitute, swap two neighbours) that turn `a` into `b`, or `limit + 1` once
 * they must be more than `limit`: every environment variable is compared at each start.
 */
function editDistance(a: string, b: string, limit: number): number {
  // Three rows of the table (a swap looks two rows back), reused; a row's smallest value never
  // decreases further down, so the comparison ends at the first row above the limit.
  let before = new Array<number>(b.length + 1).fill(0);
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  let current = new Array<number>(b.length + 1).fill(0);
  for (let i = 1; i <= a.length; i++) {
    current[0] = i;
    let smallest = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let distance = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) distance = Math.min(distance, before[j - 2]! + 1);
      current[j] = distance;
      smallest = Math.min(smallest, distance);
    }
    if (smallest > limit) return limit + 1;
    [before, previous, current] = [previous, current, before];
  }
  return Math.min(previous[b.length]!, limit + 1);
}

/** Each known name, without its unit, and the typing slips allowed (short names get one). */
const KNOWN_NAMES = [...VARIABLES, ...CLI_VARIABLES].map((known) => ({
  known,
  withoutUnit: known.replace(/_[A-Z]+$/, ''),
  slips: known.length >= 8 ? 2 : 1,
}));

/**
 * The known variable a name probably meant: the same in another case, the name without its unit
 * (`NODE_TIMEOUT` for NODE_TIMEOUT_MS), or one or two typing slips away. Short names get only one
 * slip, so the usual HOME is not taken for HOST.
 */
function meantVariable(name: string): string | undefined {
  const upper = name.toUpperCase();
  let best: { known: string; distance: number } | undefined;
  for (const { known, withoutUnit, slips } of KNOWN_NAMES) {
    // Lengths further apart than the slips allowed are never within them: no table for a long name (Linux allows 128 KiB).
    const distance =
      withoutUnit.length >= 5 && upper === withoutUnit ? 1 : Math.abs(upper.length - known.length) > slips ? Infinity : editDistance(upper, known, slips);
    if (distance <= slips && (!best || distance < best.distance)) best = { known, distance };
  }
  return best?.known;
}

/**
 * One line naming the variables of the environment that look like Mothership's but are not read
 * (a typo there is otherwise silently ignored: `NODE_TIMEOUT=60000` leaves the default), each with
 * the variable it probably meant; null when there are none. Names only: values may be secrets.
 */
export function lookalikeVariables(env: Env): string | null {
  const known = new Set<string>([...VARIABLES, ...CLI_VARIABLES]);
  // Kubernetes gives every container MOTHERSHIP_SERVICE_HOST, MOTHERSHIP_PORT, MOTHERSHIP_PORT_8080_TCP...
  // for a Service named mothership: not typos.
  const serviceLinks = env.MOTHERSHIP_SERVICE_HOST === undefined ? null : /^MOTHERSHIP_(SERVICE_|PORT($|_))/;
  const found: string[] = [];
  for (const name of Object.keys(env).sort()) {
    if (known.has(name) || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || serviceLinks?.test(name)) continue;
    const unprefixed = /^MOTHERSHIP_/i.test(name) ? name.slice('MOTHERSHIP_'.length) : null;
    const meant = meantVariable(name) ?? (unprefixed === null ? undefined : meantVariable(unprefixed));
    if (meant) found.push(`${name} (did you mean ${meant}?)`);
    else if (unprefixed !== null) found.push(`${name} (not a Mothership variable)`);
  }
  return found.length ? `Ignored environment variables that look like Mothership's: ${found.join(', ')}; docs/configuration.md lists them all` : null;
}

type ValueOf<S> = S extends { enum: readonly (infer E)[] } ? E : S extends { type: 'integer' | 'number' } ? number : string;
/** The validated environment, typed from the schema: a variable with a default is always there. */
type EnvValues = { [K in Variable as Properties[K] extends { default: unknown } ? K : never]: ValueOf<Properties[K]> } & {
  [K in Variable as Properties[K] extends { default: unknown } ? never : K]?: ValueOf<Properties[K]>;
};

/** Variables whose value an error message must not repeat (credentials, or URLs that may hold one). */
const SECRET: ReadonlySet<Variable> = new Set(['ADMIN_TOKEN', 'SECRETS_KEY', 'ENRICHMENT_LLM_API_KEY', 'DATABASE_URL', 'REDIS_URL', 'ENRICHMENT_LLM_URL']);
/** An empty variable counts as unset, except where empty is a value: no Redis prefix, or a (refused) empty admin token. */
const EMPTY_IS_A_VALUE: ReadonlySet<string> = new Set(['REDIS_PREFIX', 'ADMIN_TOKEN']);

/** An origin as a browser sends it: http(s), a host, an optional port, nothing else (`new URL` normalises it to itself). */
function isOrigin(entry: string): boolean {
  return /^https?:\/\//.test(entry) && URL.canParse(entry) && new URL(entry).origin === entry;
}

function invalid(name: Variable, raw: string | undefined): ConfigError {
  const got = SECRET.has(name) || raw === undefined ? '' : `, got "${raw}"`;
  return new ConfigError(`${name} must be ${ENV_SCHEMA.properties[name].description}${got}`);
}

/** An address, a CIDR or one of proxy-addr's names (what Fastify's trustProxy takes). */
function isProxyEntry(entry: string): boolean {
  if (['loopback', 'linklocal', 'uniquelocal'].includes(entry)) return true;
  const [address, prefix, extra] = entry.split('/');
  const family = isIP(address ?? '');
  if (!family || extra !== undefined) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

/** `group=cost,group=cost` -> {group: cost} (RATE_LIMIT_COSTS, already validated). */
function costs(raw: string | undefined): Record<string, number> {
  const entries = (raw ?? '')
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean);
  return Object.fromEntries(entries.map((entry) => entry.split('=')).map(([group, cost]) => [group!, Number(cost)]));
}

/** A base64 key that decodes to the 32 bytes AES-256 needs. */
function secretsKeyFrom(text: string, source: string): Buffer {
  const key = Buffer.from(text, 'base64');
  if (key.length !== 32) throw new ConfigError(`SECRETS_KEY must be ${ENV_SCHEMA.properties.SECRETS_KEY.description}${source}`);
  return key;
}

/**
 * Reads and validates the environment; touches nothing (DATA_DIR is `prepareDataDir`'s). Throws a
 * ConfigError naming the first variable with a bad value.
 */
export function loadConfig(env: Env = process.env) {
  const data = Object.fromEntries(Object.entries(env).filter(([name, value]) => value !== undefined && (value !== '' || EMPTY_IS_A_VALUE.has(name))));
  // The validator would read `1e3`, `0x10` or `Infinity` as numbers; the documented form is digits.
  for (const [name, rule] of Object.entries(ENV_SCHEMA.properties) as [Variable, { type: string }][]) {
    const raw = data[name];
    if (raw === undefined) continue;
    if (rule.type === 'integer' && !/^\s*\d{1,16}\s*$/.test(raw)) throw invalid(name, raw);
    if (rule.type === 'number' && !/^\s*\d{1,16}(\.\d{1,16})?\s*$/.test(raw)) throw invalid(name, raw);
  }
  let values: EnvValues;
  try {
    values = envSchema<EnvValues>({ schema: ENV_SCHEMA, data, env: false });
  } catch (error) {
    const [first] = (error as { errors?: ErrorObject[] }).errors ?? [];
    if (!first) throw error;
    const name = first.instancePath.split('/')[1] as Variable;
    throw invalid(name, env[name]);
  }
  if (values.MQTT_BACKOFF_MAX_MS < values.MQTT_BACKOFF_INITIAL_MS) throw new ConfigError('MQTT_BACKOFF_MAX_MS must be at least MQTT_BACKOFF_INITIAL_MS');
  for (const name of ['DATABASE_URL', 'REDIS_URL', 'ENRICHMENT_LLM_URL'] as const)
    if (values[name] !== undefined && !URL.canParse(values[name])) throw invalid(name, undefined);
  // ioredis reads the path as a database number and sends SELECT NaN for anything else; the refusal
  // is an uncaught error that kills the process with a stack trace.
  if (values.REDIS_URL !== undefined && !/^\/?\d*$/.test(new URL(values.REDIS_URL).pathname))
    throw new ConfigError('REDIS_URL must be a redis:// URL whose path, if any, is a database number (redis://host:6379/0)');
  if (values.TRUST_PROXY !== undefined && !values.TRUST_PROXY.split(',').every((entry) => isProxyEntry(entry.trim())))
    throw invalid('TRUST_PROXY', values.TRUST_PROXY);
  const corsOrigins = values.CORS_ORIGINS?.split(',').map((entry) => entry.trim()) ?? [];
  if (!corsOrigins.every(isOrigin)) throw invalid('CORS_ORIGINS', values.CORS_ORIGINS);

  return {
    port: values.PORT,
    host: values.HOST,
    dataDir: path.resolve(values.DATA_DIR),
    databaseUrl: values.DATABASE_URL ?? null,
    databaseTimeoutMs: values.DATABASE_TIMEOUT_MS,
    httpRequestTimeoutMs: values.HTTP_REQUEST_TIMEOUT_MS,
    httpConnectionsPerAddress: values.HTTP_CONNECTIONS_PER_ADDRESS,
    redisUrl: values.REDIS_URL ?? null,
    given: {
      adminToken: values.ADMIN_TOKEN ?? null,
      mothershipId: values.MOTHERSHIP_ID ?? null,
      secretsKey: values.SECRETS_KEY === undefined ? null : secretsKeyFrom(values.SECRETS_KEY, ''),
    },
    worker: values.WORKER,
    webhookTimeoutMs: values.WEBHOOK_TIMEOUT_MS,
    webhookRetryDelayMs: values.WEBHOOK_RETRY_DELAY_MS,
    webhookPendingMax: values.WEBHOOK_PENDING_MAX,
    mqttBackoffInitialMs: values.MQTT_BACKOFF_INITIAL_MS,
    mqttBackoffMaxMs: values.MQTT_BACKOFF_MAX_MS,
    mqttBirthDelayMaxMs: values.MQTT_BIRTH_DELAY_MAX_MS,
    mqttTakeover: { sessionMs: values.MQTT_TAKEOVER_SESSION_MS, backoffMs: values.MQTT_TAKEOVER_BACKOFF_MS },
    healthIntervalMs: values.HEALTH_INTERVAL_MS,
    nodeTimeoutMs: values.NODE_TIMEOUT_MS,
    recordLimits: { nodes: values.NODE_LIMIT, persons: values.PERSON_LIMIT, zones: values.ZONE_LIMIT },
    presenceAwayDelayMs: values.PRESENCE_AWAY_DELAY_MS,
    enrichmentLeaseMs: values.ENRICHMENT_LEASE_MS,
    enrichmentRetryBaseMs: values.ENRICHMENT_RETRY_BASE_MS,
    enrichmentLlm: values.ENRICHMENT_LLM_URL
      ? { url: values.ENRICHMENT_LLM_URL, model: values.ENRICHMENT_LLM_MODEL, apiKey: values.ENRICHMENT_LLM_API_KEY ?? null }
      : null,
    rateLimit: {
      capacity: values.RATE_LIMIT_CAPACITY,
      refillPerSecond: values.RATE_LIMIT_REFILL_PER_SEC,
      failOpen: values.RATE_LIMIT_REDIS_FAILURE === 'open',
      costs: costs(values.RATE_LIMIT_COSTS),
    },
    eventRetentionDays: values.EVENT_RETENTION_DAYS,
    eventStreams: { max: values.EVENT_STREAMS_MAX, perClient: values.EVENT_STREAMS_PER_CLIENT, bufferBytes: values.EVENT_STREAM_BUFFER_BYTES },
    webhookLogRetentionDays: values.WEBHOOK_LOG_RETENTION_DAYS,
    enrichmentRetentionDays: values.ENRICHMENT_RETENTION_DAYS,
    storageBudgetMb: values.STORAGE_BUDGET_MB,
    baselineStorageMb: values.BASELINE_STORAGE_MB,
    redisPrefix: values.REDIS_PREFIX,
    trustProxy: values.TRUST_PROXY ?? (false as const),
    corsOrigins,
    logLevel: values.LOG_LEVEL,
    logFormat: values.LOG_FORMAT,
  };
}

/**
 * Reads DATA_DIR/name, or writes `generate()` there on first start (mode 0600). Written beside its
 * name and linked into place: a write the disk refuses must not leave an empty file that the next
 * start would read as the value (an empty admin token), and of two starts at once the first link
 * wins and the other reads its value (a rename would let each keep its own: two admin tokens, two
 * secrets keys).
 */
export function persisted(
  dataDir: string,
  name: string,
  generate: () => string,
  // Not the pid alone: two containers on one volume are both pid 1, and would write through one name.
  temporary = `${name}.tmp-${process.pid}-${randomBytes(6).toString('hex')}`,
): { value: string; generated: boolean } {
  const file = path.join(dataDir, name);
  const read = () => ({ value: readFileSync(file, 'utf8').trim(), generated: false });
  if (existsSync(file)) return read();
  const value = generate();
  const partial = path.join(dataDir, temporary);
  try {
    writeFileSync(partial, value + '\n', { mode: 0o600 });
    linkOrRename(partial, file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return read();
    throw new ConfigError(
      `Cannot write ${file} (DATA_DIR): ${code === 'ENOSPC' ? 'the disk is full' : code === 'EACCES' || code === 'EROFS' ? 'not writable' : (code ?? 'unknown error')}.`,
    );
  } finally {
    rmSync(partial, { force: true });
  }
  return { value, generated: true };
}

/** A file system without hard links (FAT on a USB stick) gets the rename: the last of two starts at once wins there. */
function linkOrRename(from: string, to: string): void {
  try {
    linkSync(from, to);
  } catch (error) {
    if (!['EPERM', 'ENOTSUP', 'EOPNOTSUPP'].includes((error as NodeJS.ErrnoException).code ?? '')) throw error;
    renameSync(from, to);
  }
}

/**
 * mkdir -p, one level at a time: Node's recursive mkdirSync never returns for a path under /proc
 * (each mkdir there fails ENOENT though the parent exists), so a mistyped DATA_DIR hung the start. A
 * level another start made meanwhile is fine.
 */
function makeDirectory(dir: string): void {
  const missing: string[] = [];
  for (let current = path.resolve(dir); !existsSync(current); current = path.dirname(current)) {
    missing.unshift(current);
    if (path.dirname(current) === current) break;
  }
  for (const level of missing) {
    try {
      mkdirSync(level, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
  }
  if (!statSync(dir).isDirectory()) throw Object.assign(new Error(`${dir} is not a directory`), { code: 'ENOTDIR' });
}

/** In DATA_DIR while the generated admin token has not been shown. */
const UNSHOWN_TOKEN_MARK = 'admin-token.unshown';

/**
 * Called by a start that listens and found the token unshown: removing the mark is what decides, so of
 * two starts at once only one `show`s it. A mark that cannot be removed (a read-only DATA_DIR) is
 * `kept`: the token is shown, and will be again by the next start.
 */
export function takeUnshownTokenMark(config: Config): { show: boolean; kept: boolean } {
  try {
    rmSync(path.join(config.dataDir, UNSHOWN_TOKEN_MARK));
    return { show: true, kept: false };
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ENOENT' ? { show: false, kept: false } : { show: true, kept: true };
  }
}

/**
 * The start-up step that owns DATA_DIR: creates it (only the service's user may enter: it holds the
 * admin token, the secrets key and the SQLite database), and reads, or generates on the first start,
 * each installation value the environment does not set.
 */
export function prepareDataDir(config: EnvConfig): Config {
  const { given, ...rest } = config;
  try {
    makeDirectory(config.dataDir);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ConfigError(
      `DATA_DIR ${config.dataDir} cannot be used as a directory (${code === 'EEXIST' || code === 'ENOTDIR' ? 'a file is in the way' : code === 'EACCES' || code === 'EROFS' ? 'not writable' : (code ?? 'unknown error')})`,
    );
  }
  // Marked before the token exists, so no token is ever generated without its mark.
  if (given.adminToken === null && !existsSync(path.join(config.dataDir, 'admin-token')))
    persisted(config.dataDir, UNSHOWN_TOKEN_MARK, () => 'the admin token is shown by the next start that listens');
  const storedToken = given.adminToken === null ? persisted(config.dataDir, 'admin-token', () => randomBytes(24).toString('base64url')) : null;
  if (storedToken && storedToken.value.length < ENV_SCHEMA.properties.ADMIN_TOKEN.minLength)
    throw new ConfigError(`ADMIN_TOKEN must be ${ENV_SCHEMA.properties.ADMIN_TOKEN.description} (DATA_DIR/admin-token; remove the file to generate a new one)`);
  let mothershipId = given.mothershipId;
  if (mothershipId === null) {
    mothershipId = persisted(config.dataDir, 'mothership-id', () => 'ms-' + randomUUID().slice(0, 8)).value;
    if (!ID_PATTERN.test(mothershipId))
      throw new ConfigError(`MOTHERSHIP_ID must be ${ENV_SCHEMA.properties.MOTHERSHIP_ID.description}, got "${mothershipId}" (from DATA_DIR/mothership-id)`);
  }
  const secretsKey =
    given.secretsKey ?? secretsKeyFrom(persisted(config.dataDir, 'secrets-key', () => randomBytes(32).toString('base64')).value, ' (DATA_DIR/secrets-key)');
  return {
    ...rest,
    adminToken: given.adminToken ?? storedToken!.value,
    adminTokenUnshown: storedToken !== null && existsSync(path.join(config.dataDir, UNSHOWN_TOKEN_MARK)),
    mothershipId,
    secretsKey,
  };
}
