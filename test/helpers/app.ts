import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { sql } from 'kysely';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig, prepareDataDir, type Config } from '../../src/config.js';

export type DialectName = 'sqlite' | 'postgres';
/** Both databases, always: CI has PostgreSQL, and a missing server must fail the run, not skip it. */
export const DIALECTS: DialectName[] = ['sqlite', 'postgres'];

export const ADMIN_TOKEN = 'test-admin-token-0123456789';
/** The shared Redis of the tests (each test keys under a prefix of its own). */
export const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379/0';
export const PG_ADMIN_URL = process.env.TEST_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The role the service connects as in the tests (the admin URL's role creates and drops their databases). */
const TEST_PG_ROLE = 'mothership_test';
/** The role exists already: another file created it (`duplicate_object`), or at the same moment (`unique_violation`). */
const ROLE_EXISTS = new Set(['42710', '23505']);

/**
 * A fresh PostgreSQL database for one test file, owned by TEST_PG_ROLE, on the cluster of `adminUrl`
 * (a superuser's); dropped by the returned function.
 */
export async function createPgDatabase(adminUrl = PG_ADMIN_URL): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `ms_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  // The service connects as a deployment connects it: a role that owns its database, no superuser.
  await admin.query(`create role ${TEST_PG_ROLE} login`).catch((error: { code?: string }) => {
    if (!ROLE_EXISTS.has(error.code ?? '')) throw error;
  });
  await admin.query(`create database ${name} owner ${TEST_PG_ROLE}`);
  await admin.end();
  const url = adminUrl.replace(/\/[^/]*$/, `/${name}`).replace(/\/\/[^@/]*@/, `//${TEST_PG_ROLE}@`);
  return {
    url,
    drop: async () => {
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      // An ended pool (Kysely's destroy) resolves before its connections close. Forced meanwhile, the
      // drop terminates one, whose client reports it as an error its pool no longer hands anyone: an
      // uncaught exception that failed a test on a loaded CI machine. Wait for them (a bound, not a
      // measurement), then force what is left (a crashed child's backend).
      const sessions = async () => Number((await client.query('select count(*) from pg_stat_activity where datname = $1', [name])).rows[0].count);
      await eventually(async () => (await sessions()) === 0, 5000, 'the connections to close').catch(() => {});
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

export interface TestEnv {
  dataDir: string;
  env: Record<string, string>;
  cleanup: () => Promise<void>;
}

/** A temporary DATA_DIR and, for PostgreSQL, a private database (in the cluster of `adminUrl`). */
export async function createTestEnv(dialect: DialectName, extra: Record<string, string> = {}, adminUrl?: string): Promise<TestEnv> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-test-'));
  const database = dialect === 'postgres' ? await createPgDatabase(adminUrl) : null;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    ADMIN_TOKEN,
    LOG_LEVEL: 'silent',
    MOTHERSHIP_ID: 'test-ms',
    WORKER: 'off',
    // Tests that are not about rate limiting must not be limited; the limiter tests set their own.
    RATE_LIMIT_CAPACITY: '100000',
    RATE_LIMIT_REFILL_PER_SEC: '10000',
    // Every test client is 127.0.0.1; the connection cap's own test sets one.
    HTTP_CONNECTIONS_PER_ADDRESS: '0',
    ...(database ? { DATABASE_URL: database.url } : {}),
    ...extra,
  };
  return {
    dataDir,
    env,
    cleanup: async () => {
      await database?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface TestApp extends App {
  config: Config;
  /** Injects a request as admin; JSON in, parsed JSON out. */
  api(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Record<string, unknown> }>;
  cleanup(): Promise<void>;
}

export async function startTestApp(
  dialect: DialectName,
  extra: Record<string, string> = {},
  /** `cluster`: the admin URL of the PostgreSQL cluster to create the database in (startPostgres). */
  options: { start?: boolean; testEnv?: TestEnv; cluster?: string } = {},
): Promise<TestApp> {
  const testEnv = options.testEnv ?? (await createTestEnv(dialect, extra, options.cluster));
  let config: Config;
  let app: App | undefined;
  try {
    config = prepareDataDir(loadConfig({ ...testEnv.env, ...extra }));
    app = await buildApp(config);
    if (options.start) await app.start();
    await app.http.ready();
  } catch (error) {
    // A configuration or start that fails (what some tests assert) leaves no app, database or data dir behind.
    await app?.close();
    if (!options.testEnv) await testEnv.cleanup();
    throw error;
  }
  return Object.assign(app, {
    config,
    async api(method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
      const response = await app.http.inject({
        method: method as 'GET',
        url,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
        ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
      });
      const text = response.body;
      let parsed: unknown = text;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON (metrics, HTML): keep the text
      }
      return { status: response.statusCode, body: parsed, headers: response.headers };
    },
    async cleanup() {
      await app.close();
      if (!options.testEnv) await testEnv.cleanup();
    },
  });
}

/** Polls `check` until it returns a truthy value or `timeoutMs` passes. */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 5000, what = 'condition'): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`Timed out waiting for ${what}${lastError ? `: ${(lastError as Error).message}` : ''}`);
}

/** PostgreSQL: waits until one of the app's connections waits for a lock (a row's, or an advisory lock). */
export function lockWaiter(app: App, what: string): Promise<true> {
  return eventually(
    async () =>
      (
        await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(
          app.database.db,
        )
      ).rows[0]!.n === 1 || null,
    5000,
    what,
  ) as Promise<true>;
}
