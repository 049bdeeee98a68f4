import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { buildApp, type App } from '../src/app.js';
import { loadConfig, prepareDataDir } from '../src/config.js';
import type { LoadRequest, LoadResult as GeneratorResult } from './loadgen.js';
import type { SignedPlan } from './signed-requests.js';
import type { ZonePlan } from './zone-entries.js';

/** A run's figures, with the servers' CPU. */
export type LoadResult = GeneratorResult & { perCpuSecond: number };

const BENCH_ADMIN_TOKEN = 'bench-admin-token-0123456789';

export const PG_ADMIN_URL = process.env.BENCH_PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A service instance for a benchmark: its own data dir (and PostgreSQL database), limits out of the
 * way. `extend` may add routes before it starts.
 */
export async function benchApp(
  dialect: 'sqlite' | 'postgres',
  env: Record<string, string> = {},
  extend: (app: App) => void = () => {},
): Promise<{ app: App; url: string; token: (scope: 'ingest' | 'ci') => Promise<string>; close: () => Promise<void> }> {
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
      ADMIN_TOKEN: BENCH_ADMIN_TOKEN,
      LOG_LEVEL: 'silent',
      WORKER: 'off',
      RATE_LIMIT_CAPACITY: '10000000',
      RATE_LIMIT_REFILL_PER_SEC: '10000000',
      // The load generator's connections all come from 127.0.0.1.
      HTTP_CONNECTIONS_PER_ADDRESS: '0',
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
    /** A new API token of `scope`, made as an admin makes one: the credential a sensor node or a CI job holds. */
    token: async (scope) => {
      const response = await fetch(`${url}/api/tokens`, {
        method: 'POST',
        headers: { authorization: `Bearer ${BENCH_ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `bench ${scope}`, scope }),
      });
      if (response.status !== 201) throw new Error(`POST /api/tokens answered ${response.status}`);
      return ((await response.json()) as { token: string }).token;
    },
    close: async () => {
      await app.close();
      await dropDatabase();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The load generator's process, started with the first run and shared by every later one. */
let generator: ChildProcess | null = null;
let nextRun = 0;
const pending = new Map<number, { resolve: (result: GeneratorResult) => void; reject: (error: Error) => void }>();

function loadGenerator(): ChildProcess {
  if (generator) return generator;
  const child = fork(fileURLToPath(new URL('./loadgen.js', import.meta.url)), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  child.on('message', (message: { id: number; result?: GeneratorResult; error?: string }) => {
    const run = pending.get(message.id);
    pending.delete(message.id);
    if (message.error !== undefined) run?.reject(new Error(`load generator: ${message.error}`));
    else run?.resolve(message.result!);
  });
  child.on('exit', (code, signal) => {
    generator = null;
    for (const run of pending.values()) run.reject(new Error(`load generator exited (${code ?? signal})`));
    pending.clear();
  });
  // The benchmark's process may end while the generator idles: it exits when its channel closes.
  child.unref();
  child.channel?.unref();
  return (generator = child);
}

/**
 * Runs autocannon in a process of its own, as real clients are: the client's work (building,
 * signing and parsing requests) is not counted against the server measured, on either side of a
 * ratio (README.md, "How they measure"). Also counts the requests per second of CPU this process
 * (the servers) spent meanwhile, which a busy machine moves far less than the rate.
 */
export async function load(options: LoadRequest['options'], signed?: SignedPlan, zones?: ZonePlan): Promise<LoadResult> {
  const child = loadGenerator();
  const id = nextRun++;
  const cpuBefore = process.cpuUsage();
  const result = await new Promise<GeneratorResult>((resolve, reject) => {
    pending.set(id, { resolve, reject });
    child.channel?.ref();
    child.send({ id, request: { options, signed, zones } });
  }).finally(() => {
    if (!pending.size) child.channel?.unref();
  });
  const cpu = process.cpuUsage(cpuBefore);
  return { ...result, perCpuSecond: result.total ? result.total / ((cpu.user + cpu.system) / 1e6) : 0 };
}
