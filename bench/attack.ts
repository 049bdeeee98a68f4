/**
 * Every low-privilege attack of issue #34 at once, against `mothership serve` in a process of its own,
 * while a normal client measures its latency (bench/README.md, "Bounded resources under attack").
 *
 *   node dist/bench/attack.js [--minutes N] [--database postgres://...] [--budget-mb N] [--profile DIR] [--attacker-nice N]
 *
 * `--attacker-nice N`: the attackers' thread runs at this nice value (the normal client's and the
 * service's stay at 0), as attackers on machines of their own would not take the service's CPU.
 * Without it they share the machine's cores with the service on equal terms.
 *
 * `--profile DIR`: the service writes a CPU profile (`--cpu-prof`) into DIR when the run ends.
 *
 * Attackers: an `ingest` token (events at the size cap, new node ids, zone entries of many persons),
 * a `read` token (streams that never read and as many reading ones as it can open), a client of the
 * broker (mode commands, valid and not), and a webhook receiver that answers 500 to everything once
 * the attack starts (until then it takes the household's deliveries, which are all sent before the
 * idle reference is measured), so retries pile up. Exit 1 when a bound of the issue is missed.
 */
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { setPriority, tmpdir } from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import mqtt from 'mqtt';
import pg from 'pg';
import { freePort, startBroker } from '../test/helpers/broker.js';
import { startReceiver } from '../test/helpers/receiver.js';
import { spawnMothership, stopProcess } from '../test/helpers/process.js';
import { JSON_LIMITS } from '../src/limits.js';
import { fmt, percentile } from './lib.js';

const arg = (name: string) => {
  const index = process.argv.indexOf(name);
  return index > 0 ? process.argv[index + 1] : undefined;
};
const MINUTES = Number(arg('--minutes') ?? 10);
const DATABASE_URL = arg('--database');
const PERSONS = 1000;
/** Small enough that the attack reaches the storage budget within a short run. */
const BUDGET_MB = Number(arg('--budget-mb') ?? 50);
const PROFILE_DIR = arg('--profile');
const ATTACKER_NICE = Number(arg('--attacker-nice') ?? 0);
const STREAMS = 800;
const PAUSED_STREAMS = 5;
/** Long enough that the idle p99 is not a handful of samples (about 570: the sixth slowest). */
const IDLE_MS = 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const dataDir = mkdtempSync(path.join(tmpdir(), 'mothership-attack-'));
const broker = await startBroker();
const receiver = await startReceiver(204);
const port = await freePort();
const base = `http://127.0.0.1:${port}`;
const child = spawnMothership(
  ['serve'],
  {
    DATA_DIR: dataDir,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_FORMAT: 'json',
    MOTHERSHIP_ID: 'ms-attack',
    STORAGE_BUDGET_MB: String(BUDGET_MB),
    // The attackers and the normal client all come from 127.0.0.1: a cap per address would refuse them alike.
    HTTP_CONNECTIONS_PER_ADDRESS: '0',
    ...(DATABASE_URL ? { DATABASE_URL } : {}),
  },
  PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${PROFILE_DIR}`] : [],
);
let logLines = 0;
/** Lines by message: which lines fill the log. */
const logMessages = new Map<string, number>();
/** The first line of each message, to see why. */
const logSamples = new Map<string, string>();
let partial = '';
const countLines = (chunk: Buffer) => {
  const lines = (partial + chunk.toString()).split('\n');
  partial = lines.pop()!;
  logLines += lines.length;
  for (const line of lines) {
    const message = /"msg":"([^"]{0,80})/.exec(line)?.[1] ?? line.slice(0, 80);
    logMessages.set(message, (logMessages.get(message) ?? 0) + 1);
    if (!logSamples.has(message)) logSamples.set(message, line.slice(0, 400));
  }
};
child.stdout!.on('data', countLines);
child.stderr!.on('data', countLines);

const cleanups: (() => unknown)[] = [];
async function shutdown(code: number): Promise<never> {
  for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => {});
  // A profile is written only by a process that exits by itself.
  await stopProcess(child, PROFILE_DIR ? 'SIGTERM' : 'SIGKILL');
  await broker.destroy();
  await receiver.close();
  rmSync(dataDir, { recursive: true, force: true });
  process.exit(code);
}
process.once('SIGINT', () => void shutdown(130));

for (const deadline = Date.now() + 30_000; ;) {
  if (
    await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    )
  )
    break;
  if (Date.now() > deadline || child.exitCode !== null) {
    console.error(`the service did not start:\n${child.output()}`);
    await shutdown(1);
  }
  await sleep(100);
}
const adminToken = readFileSync(path.join(dataDir, 'admin-token'), 'utf8').trim();
const call = async (token: string, method: string, url: string, body?: unknown) =>
  fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
const tokenOf = async (scope: string) =>
  ((await (await call(adminToken, 'POST', '/api/tokens', { name: `attack ${scope}`, scope })).json()) as { token: string }).token;
const ingest = await tokenOf('ingest');
const read = await tokenOf('read');
const normal = await tokenOf('ingest');
const normalRead = await tokenOf('read');

// A household and its integrations: a broker, and a webhook (its receiver fails every delivery once the attack starts).
await call(adminToken, 'POST', '/api/settings/integration', {
  mqtt: { enabled: true, broker_url: broker.url },
  webhook: { enabled: true, url: receiver.url },
});
await call(adminToken, 'POST', '/api/zones', { id: 'hall', name: 'Hall' });
await call(adminToken, 'POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
for (let i = 0; i < PERSONS; i += 50) {
  await Promise.all(Array.from({ length: 50 }, (_, j) => call(adminToken, 'POST', '/api/persons', { id: `p${i + j}`, name: `Person ${i + j}` })));
}
await call(adminToken, 'POST', '/api/persons', { id: 'resident', name: 'Resident' });

/** The normal client (bench/normal-client.ts, a thread of its own): the latencies of a phase, sorted (all, and the zone moves'), and its answers by status. */
async function normalClient(untilMs: number, { underAttack = false } = {}): Promise<{ latencies: number[]; writes: number[] }> {
  const worker = new Worker(new URL('./normal-client.js', import.meta.url), { workerData: { base, ingest: normal, read: normalRead, untilMs } });
  // Linux: a thread's own nice value; the worker's thread, started above, kept the one it inherited.
  if (underAttack && ATTACKER_NICE) setPriority(process.pid, ATTACKER_NICE);
  const [result] = (await once(worker, 'message')) as [{ latencies: number[]; writes: number[]; statuses: Record<number, number> }];
  console.log(`normal client answers: ${JSON.stringify(result.statuses)}`);
  return result;
}

function rssMb(): number {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}
const pgClient = DATABASE_URL ? new pg.Client({ connectionString: DATABASE_URL }) : null;
if (pgClient) {
  await pgClient.connect();
  cleanups.push(() => pgClient.end());
}
/**
 * What the budget bounds, on disk: on SQLite the database file (its WAL apart); on PostgreSQL the two
 * logs' files (`pg_total_relation_size`: table, TOAST and indexes), as the budget there is the logs'
 * alone. `pg_database_size` (catalogs and the other tables too) is reported beside it.
 */
async function databaseMb(): Promise<number> {
  if (pgClient)
    return (
      Number((await pgClient.query(`select pg_total_relation_size('events') + pg_total_relation_size('webhook_deliveries') as size`)).rows[0].size) / 2 ** 20
    );
  return readdirSync(dataDir).reduce((sum, file) => sum + (file.includes('.db') ? statSync(path.join(dataDir, file)).size : 0), 0) / 2 ** 20;
}
/** What the storage budget itself counts (its last measurement), from the service's metrics. */
async function budgetCountedMb(): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return Number(/^mothership_storage_bytes (\S+)$/m.exec(text)?.[1] ?? Number.NaN) / 2 ** 20;
}
const wholeDatabaseMb = async () =>
  pgClient ? Number((await pgClient.query('select pg_database_size(current_database()) as size')).rows[0].size) / 2 ** 20 : 0;
/** SQLite's write-ahead log on disk (the budget sets its limit aside). */
const walMb = () =>
  pgClient ? 0 : readdirSync(dataDir).reduce((sum, file) => sum + (file.endsWith('-wal') ? statSync(path.join(dataDir, file)).size : 0), 0) / 2 ** 20;

console.log(
  `# Attack: ${MINUTES} min on ${DATABASE_URL ? 'PostgreSQL' : 'SQLite'}, STORAGE_BUDGET_MB=${BUDGET_MB}${ATTACKER_NICE ? `, attackers at nice ${ATTACKER_NICE}` : ''}; idle ${IDLE_MS / 1000} s first\n`,
);
// The idle reference is a quiet household: the setup's deliveries (a person.created each) sent first.
const deliveriesLeft = async () => {
  let left = 0;
  for (const state of ['pending', 'sending'])
    left += ((await (await call(adminToken, 'GET', `/api/webhook/deliveries?state=${state}&limit=1`)).json()) as unknown[]).length;
  return left;
};
while ((await deliveriesLeft()) > 0) await sleep(500);
const idle = await normalClient(Date.now() + IDLE_MS);
const idleLatencies = idle.latencies;
const idleRss = rssMb();
const idleDb = await databaseMb();
const idleP99 = percentile(idleLatencies, 99);
/** The normal client's latencies at a glance: where a p99 comes from. */
const spread = (latencies: number[]) =>
  [50, 90, 99].map((p) => `p${p} ${fmt(percentile(latencies, p), 1)}`).join(', ') + `, max ${fmt(latencies.at(-1) ?? 0, 1)} ms`;
console.log(`idle: ${spread(idleLatencies)} (zone moves: ${spread(idle.writes)}); RSS ${fmt(idleRss)} MB, database ${fmt(idleDb, 1)} MB`);

receiver.answerWith(500);
const until = Date.now() + MINUTES * 60_000;
let running = true;
const counts: Record<string, Record<number | string, number>> = {};
const count = (attack: string, status: number | string) => {
  const byStatus = (counts[attack] ??= {});
  byStatus[status] = (byStatus[status] ?? 0) + 1;
};
/** Runs `step` in `workers` loops until the attack ends; a refusal slows a loop down as a polite attacker would not. */
const loop = (attack: string, workers: number, step: (i: number) => Promise<Response>) =>
  Array.from({ length: workers }, async (_, worker) => {
    for (let i = worker; running; i += workers) {
      const response = await step(i).catch((error: Error) => error);
      if (response instanceof Response) {
        await response.arrayBuffer().catch(() => {});
        count(attack, response.status);
      } else count(attack, response.message);
    }
  });

// Streams, opened first: some that never read (TCP keeps the server's writes in its buffers), and
// as many reading ones as the read token may open.
const sockets: Socket[] = [];
cleanups.push(() => sockets.forEach((socket) => socket.destroy()));
const openStream = (paused: boolean) =>
  new Promise<void>((resolve) => {
    const socket = connect(port, '127.0.0.1');
    sockets.push(socket);
    socket.write(`GET /api/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${read}\r\nAccept: text/event-stream\r\n\r\n`);
    let answered = false;
    const done = (status: string) => {
      if (answered) return;
      answered = true;
      count('streams', status);
      if (paused) socket.pause();
      resolve();
    };
    socket.once('data', (chunk: Buffer) => done(chunk.toString().split(' ')[1] ?? '?'));
    socket.once('error', (error) => done(error.message));
    setTimeout(() => done('no answer in 10 s'), 10_000).unref();
  });
for (let i = 0; i < STREAMS + PAUSED_STREAMS; i += 50) {
  await Promise.all(Array.from({ length: Math.min(50, STREAMS + PAUSED_STREAMS - i) }, (_, j) => openStream(i + j < PAUSED_STREAMS)));
}
console.log(`streams: ${JSON.stringify(counts.streams)}`);

// The largest detail the API takes: its JSON text is exactly the limit.
const detail = { note: 'x'.repeat(JSON_LIMITS.detail - '{"note":""}'.length) };
const attacks = [
  // Disk and memory: anomaly events as large as the API takes.
  ...loop('large events', 4, () => call(ingest, 'POST', '/api/events', { type: 'anomaly.detected', severity: 'info', detail })),
  // Nodes: a new node id per heartbeat.
  ...loop('new nodes', 2, (i) => call(ingest, 'POST', `/api/nodes/attack-${i}-${randomBytes(3).toString('hex')}/heartbeat`, { quality: 50 })),
  // Occupancy: many persons in one zone, so every entry would carry the whole list.
  ...loop('zone entries', 2, (i) => call(ingest, 'POST', '/api/events', { type: 'zone.entry', person: `p${i % PERSONS}`, zone: i % 3 ? 'hall' : 'kitchen' })),
];

// The broker: a client flooding the mode command topic, valid and unknown modes alternating.
const flooder = await mqtt.connectAsync(broker.url);
cleanups.push(() => flooder.endAsync(true));
const modeTopic = 'mothership/ms-attack/system/mode/set';
const flood = (async () => {
  for (let i = 0; running; i++) {
    flooder.publish(modeTopic, ['home', 'away', 'nonsense', `x${i}`][i % 4]!, { qos: 0 });
    count('mqtt commands', 'sent');
    if (i % 200 === 0) await sleep(100);
  }
})();

let maxRss = idleRss;
let maxDb = idleDb;
let maxCounted = 0;
let maxWal = 0;
let maxWholeDb = await wholeDatabaseMb();
const idleWholeDb = maxWholeDb;
let maxLinesPerMinute = 0;
const minuteMarks: number[] = [logLines];
const sampler = setInterval(() => {
  maxRss = Math.max(maxRss, rssMb());
  void databaseMb().then((mb) => (maxDb = Math.max(maxDb, mb)));
  void budgetCountedMb().then(
    (mb) => (maxCounted = Math.max(maxCounted, mb)),
    () => {},
  );
  maxWal = Math.max(maxWal, walMb());
  void wholeDatabaseMb().then((mb) => (maxWholeDb = Math.max(maxWholeDb, mb)));
}, 2_000);
const minuter = setInterval(() => {
  minuteMarks.push(logLines);
  maxLinesPerMinute = Math.max(maxLinesPerMinute, minuteMarks.at(-1)! - minuteMarks.at(-2)!);
  console.log(
    `  ${minuteMarks.length - 1} min: RSS ${fmt(rssMb())} MB (max ${fmt(maxRss)}), database max ${fmt(maxDb, 1)} MB, ${minuteMarks.at(-1)! - minuteMarks.at(-2)!} log lines`,
  );
}, 60_000);

const underAttack = await normalClient(until, { underAttack: true });
const attackLatencies = underAttack.latencies;
running = false;
clearInterval(sampler);
clearInterval(minuter);
await Promise.all([...attacks, flood]);
const attackP99 = percentile(attackLatencies, 99);
console.log(`under attack: ${spread(attackLatencies)} (zone moves: ${spread(underAttack.writes)})`);
const streamRefused = Object.entries(counts.streams ?? {}).filter(([status]) => status !== '200');

console.log(`\nattacks (responses by status):`);
for (const [attack, byStatus] of Object.entries(counts)) console.log(`  ${attack}: ${JSON.stringify(byStatus)}`);
const verdicts = [
  ['RSS within +150 MB of idle', maxRss - idleRss <= 150, `${fmt(idleRss)} -> max ${fmt(maxRss)} MB`],
  ['log under 100 lines a minute', maxLinesPerMinute < 100, `max ${maxLinesPerMinute} lines in a minute`],
  ['normal p99 within 2x of idle', attackP99 <= 2 * Math.max(idleP99, 5), `${fmt(idleP99, 1)} -> ${fmt(attackP99, 1)} ms`],
  ['database within the storage budget', maxDb <= BUDGET_MB, `max ${fmt(maxDb, 1)} of ${BUDGET_MB} MB`],
  ['streams beyond the cap refused', streamRefused.length > 0, JSON.stringify(counts.streams)],
] as const;
console.log(`log lines by message (whole run):`);
for (const [message, lines] of [...logMessages].sort((a, b) => b[1] - a[1]).slice(0, 8)) console.log(`  ${lines}  ${logSamples.get(message)}`);
console.log(
  pgClient
    ? `the logs on disk: ${fmt(idleDb, 1)} -> max ${fmt(maxDb, 1)} MB (pg_database_size ${fmt(idleWholeDb, 1)} -> max ${fmt(maxWholeDb, 1)} MB); the budget counted max ${fmt(maxCounted, 1)} MB; budget ${BUDGET_MB} MB`
    : `database on disk: ${fmt(idleDb, 1)} -> max ${fmt(maxDb, 1)} MB (of it the WAL: max ${fmt(maxWal, 1)} MB); the budget counted max ${fmt(maxCounted, 1)} MB; budget ${BUDGET_MB} MB`,
);
for (const [what, met, figures] of verdicts) console.log(`${met ? 'met    ' : 'MISSED '} ${what}: ${figures}`);
await shutdown(verdicts.every(([, met]) => met) ? 0 : 1);
