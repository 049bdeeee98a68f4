import autocannon from 'autocannon';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { buildApp, type App } from '../src/app.js';
import { loadConfig, prepareDataDir } from '../src/config.js';

export const PG_ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A service instance for a benchmark: its own data dir (and PostgreSQL database), limits out of the
 * way. `extend` may add routes before it starts.
 */
export async function benchApp(
  dialect: 'sqlite' | 'postgres',
  env: Record<string, string> = {},
  extend: (app: App) => void = () => {},
): Promise<{ app: App; url: string; close: () => Promise<void> }> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-bench-'));
  let databaseUrl: string | undefined;
  let dropDatabase = async () => {};
  if (dialect === 'postgres') {
    const name = `ms_bench_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
    await admin.connect();
    await admin.query(`create database ${name}`);
    await admin.end();
    databaseUrl = PG_ADMIN_URL.replace(/\/[^/]*$/, `/${name}`);
    dropDatabase = async () => {
      const client = new pg.Client({ connectionString: PG_ADMIN_URL });
      await client.connect();
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    };
  }
  const config = prepareDataDir(
    loadConfig({
      DATA_DIR: dataDir,
      ADMIN_TOKEN: 'bench-admin-token-0123456789',
      LOG_LEVEL: 'silent',
      WORKER: 'off',
      RATE_LIMIT_CAPACITY: '10000000',
      RATE_LIMIT_REFILL_PER_SEC: '10000000',
      MOTHERSHIP_ID: `bench${randomBytes(3).toString('hex')}`,
      ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}),
      ...env,
    }),
  );
  const app = await buildApp(config);
  extend(app);
  await app.start();
  const url = await app.http.listen({ port: 0, host: '127.0.0.1' });
  return {
    app,
    url,
    close: async () => {
      await app.close();
      await dropDatabase();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  total: number;
  /** Answers by HTTP status. */
  statuses: Record<string, number>;
}

/**
 * Runs autocannon and reduces its result to what the benchmarks report. Throughput is requests
 * over the time from the start to the last response: with `amount`, autocannon only notices the end
 * at its next one-second tick and reports that rounded-up duration, which understates a short run
 * (README.md, "How they measure").
 */
export async function load(options: autocannon.Options): Promise<LoadResult> {
  const started = performance.now();
  let lastResponse = started;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(options, (error, finished) => (error ? reject(error) : resolve(finished)));
    instance.on('response', () => {
      lastResponse = performance.now();
    });
  });
  return {
    rps: result.requests.total / ((lastResponse - started) / 1000),
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    total: result.requests.total,
    statuses: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([status, stats]) => [status, stats.count ?? 0])),
  };
}
