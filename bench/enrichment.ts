import Fastify, { type FastifyReply } from 'fastify';
import { benchApp, load, type LoadResult } from './harness.js';
import { PER_BOT, signedRequests, type Bot } from './signed-requests.js';
import { CHECK, QUICK, fmt, header, ratio, roundsCompared } from './lib.js';

const CONNECTIONS = 50;
/**
 * Ours and the reference alternate over this many measured rounds, as the micro-benchmarks do; the
 * guard's run on a busy machine takes more, shorter ones (README.md, "The guard").
 */
const ROUNDS = CHECK ? 6 : 3;

/** A recorded answer: status, headers and body, as the service sent them. */
interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * The reference: a bare Fastify route answering 202, in the same process as the service. With
 * `answer`, it replays that answer instead, checking nothing: for a refusal, what its bytes alone
 * cost (the header policy and the RateLimit fields are most of them, for the client parsing them too).
 */
async function bareRoute(answer?: Answer) {
  const bare = Fastify();
  bare.post('/api/request-enrichment', async (_request, reply) =>
    answer ? reply.code(answer.status).headers(answer.headers).send(answer.body) : accept(reply),
  );
  return { url: await bare.listen({ port: 0, host: '127.0.0.1' }), close: () => bare.close() };
}

const accept = (reply: FastifyReply) => reply.code(202).send({ status: 'queued', estimated_wait_seconds: 5 });

/** The path of the route `shellRoute` adds, outside the service's API. */
const SHELL_PATH = '/api/bench-shell';

/**
 * The other reference for a refusal: a public route of the service that checks nothing and answers
 * as the bare route does. Every request still passes the service's HTTP shell (header policy, JSON
 * parser keeping the raw body, input-shape checks, the rate limiter, the redacting request logger),
 * so no refusal, which passes it too, can be faster.
 */
async function shellRoute(dialect: 'sqlite' | 'postgres') {
  return benchApp(dialect, {}, (app) => void app.http.post(SHELL_PATH, { config: { auth: 'public' } }, async (_request, reply) => accept(reply)));
}

/** The service's answer to one request of the generator, without the fields Node sets per response. */
async function recordAnswer(url: string, request: { body: string; headers: Record<string, string> }): Promise<Answer> {
  const response = await fetch(url + '/api/request-enrichment', { method: 'POST', headers: request.headers, body: request.body });
  const headers = Object.fromEntries([...response.headers].filter(([name]) => !['date', 'connection', 'keep-alive', 'content-length'].includes(name)));
  return { status: response.status, headers, body: await response.text() };
}

/** What is measured: accepted requests, or one way of refusing them. */
interface Scenario {
  name: string;
  /** The answer every measured request must get. */
  status: number;
  /** Bots the requests are spread over, for `total` requests in all. */
  bots: (total: number) => number;
  env?: Record<string, string>;
  /** Sign with a secret no bot has. */
  badSignature?: boolean;
  /** Each bot starts with its daily quota used. */
  atQuota?: boolean;
}

const SCENARIOS: Scenario[] = [
  // Fresh bots and completed matches, so the quota never refuses.
  { name: 'accepted', status: 202, bots: (total) => total / PER_BOT },
  { name: 'bad signature', status: 401, bots: () => 50, badSignature: true },
  { name: 'bot at quota', status: 429, bots: () => 50, atQuota: true },
  // Each bot's bucket (20 requests) is emptied by the warm-up; the matches do not exist, so the quota is untouched.
  { name: 'rate limited', status: 429, bots: () => 50, env: { RATE_LIMIT_CAPACITY: '20', RATE_LIMIT_REFILL_PER_SEC: '0.001' } },
];

/** A service with `botCount` bots and PER_BOT completed, never requested matches for each (or jobs using their quota). */
async function seededService(dialect: 'sqlite' | 'postgres', botCount: number, scenario: Scenario) {
  const service = await benchApp(dialect, { WORKER: process.env.BENCH_WORKER ?? 'off', ...scenario.env });
  const bots: Bot[] = [];
  for (let b = 0; b < botCount; b++) bots.push(await service.app.enrichment.bots.create({ id: `bot-${b}`, name: `Bot ${b}` }));
  if (scenario.env?.RATE_LIMIT_CAPACITY) return { ...service, bots };
  const now = new Date().toISOString();
  const ids = Array.from({ length: botCount * PER_BOT }, (_, index) => `m${index}`);
  const matches = ids.map((id) => ({
    id,
    status: 'completed' as const,
    replay: '{"players":["a","b"]}',
    enrichment_requested_at: scenario.atQuota ? now : null,
    enrichment_status: null,
    commentary: null,
    enrichment_error: null,
    enrichment_completed_at: null,
    created_at: now,
  }));
  const jobs = ids.map((id, index) => ({
    match_id: id,
    bot_id: bots[Math.floor(index / PER_BOT)]!.id,
    state: 'completed' as const,
    attempts: 1,
    run_after: now,
    lease_owner: null,
    lease_expires_at: null,
    enqueued_at: now,
    started_at: now,
    finished_at: now,
    last_error: null,
  }));
  const db = service.app.database.db;
  for (let start = 0; start < matches.length; start += 500) {
    await db
      .insertInto('matches')
      .values(matches.slice(start, start + 500))
      .execute();
    if (scenario.atQuota)
      await db
        .insertInto('enrichment_jobs')
        .values(jobs.slice(start, start + 500))
        .execute();
  }
  return { ...service, bots };
}

const count = async (service: Awaited<ReturnType<typeof seededService>>, table: 'enrichment_jobs' | 'nonces') =>
  Number(
    (
      await service.app.database.db
        .selectFrom(table)
        .select((eb) => eb.fn.countAll<number>().as('count'))
        .executeTakeFirstOrThrow()
    ).count,
  );

/**
 * Both targets get the same warm-up run, then they alternate over ROUNDS measured runs of the same
 * size: machine noise and JIT order favour neither. Every accepted request is for a fresh match.
 */
async function compare(
  dialect: 'sqlite' | 'postgres',
  scenario: Scenario,
  warmup: number,
  measured: Size,
): Promise<{ ours: LoadResult[]; reference: LoadResult[]; replay: LoadResult[]; shell: LoadResult[] }> {
  // Accepted requests need a fresh match each, so they are measured by count, never by time.
  const total = warmup + ROUNDS * ('amount' in measured ? measured.amount : 0);
  const service = await seededService(dialect, scenario.bots(total), scenario);
  const bare = await bareRoute();
  const secret = scenario.badSignature ? 'mss_not-the-secret' : undefined;
  let replayed: Awaited<ReturnType<typeof bareRoute>> | null = null;
  let shellService: Awaited<ReturnType<typeof shellRoute>> | null = null;
  try {
    let sent = 0;
    const oursRun = async (size: Size) => {
      const result = await load({ url: service.url, connections: CONNECTIONS, ...size }, { bots: service.bots, first: sent, secret });
      sent += result.total;
      return result;
    };
    const bareRun = (url: string, size: Size) => load({ url, connections: CONNECTIONS, ...size }, { bots: service.bots, first: 0, secret });
    await oursRun({ amount: warmup });
    await bareRun(bare.url, { amount: warmup });
    // A refusal writes nothing, so one more changes nothing: its answer, replayed by a bare route.
    if (scenario.status !== 202) {
      // The guard's run leaves out the replayed answer, which has no floor.
      if (!CHECK) {
        const answer = await recordAnswer(service.url, signedRequests({ bots: service.bots, first: sent, secret }).setupRequest({}));
        if (answer.status !== scenario.status) throw new Error(`${scenario.name}: recorded a ${answer.status} to replay, expected ${scenario.status}`);
        replayed = await bareRoute(answer);
        await bareRun(replayed.url, { amount: warmup });
      }
      shellService = await shellRoute(dialect);
    }
    const shellRun = (url: string, size: Size) => load({ url, connections: CONNECTIONS, ...size }, { bots: service.bots, first: 0, secret, path: SHELL_PATH });
    if (shellService) await shellRun(shellService.url, { amount: warmup });
    const before = { jobs: await count(service, 'enrichment_jobs'), nonces: await count(service, 'nonces') };
    const ours: LoadResult[] = [];
    const reference: LoadResult[] = [];
    const replay: LoadResult[] = [];
    const shell: LoadResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      ours.push(await oursRun(measured));
      reference.push(await bareRun(bare.url, measured));
      if (replayed) replay.push(await bareRun(replayed.url, measured));
      if (shellService) shell.push(await shellRun(shellService.url, measured));
    }
    const answered = ours.reduce((sum, result) => sum + (result.statuses[String(scenario.status)] ?? 0), 0);
    const asked = ours.reduce((sum, result) => sum + result.total, 0);
    if (answered !== asked)
      throw new Error(`${scenario.name}: expected ${asked} answers ${scenario.status}, got ${JSON.stringify(ours.map((result) => result.statuses))}`);
    const after = { jobs: await count(service, 'enrichment_jobs'), nonces: await count(service, 'nonces') };
    if (scenario.status === 202 && after.jobs !== sent) throw new Error(`expected ${sent} jobs, found ${after.jobs}`);
    // A refused request writes nothing: not a job, not a nonce.
    if (scenario.status !== 202 && (after.jobs !== before.jobs || after.nonces !== before.nonces))
      throw new Error(`${scenario.name}: refused requests wrote ${JSON.stringify({ before, after })}`);
    if (shell.some((result) => (result.statuses['202'] ?? 0) !== result.total))
      throw new Error(`${scenario.name}: the shell route answered ${JSON.stringify(shell.map((result) => result.statuses))}`);
    return { ours, reference, replay, shell };
  } finally {
    await bare.close();
    await replayed?.close();
    await shellService?.close();
    await service.close();
  }
}

/** The guard's scenarios (`--check`): a refusal passes the whole HTTP shell and the signature check. */
const GUARDED_SCENARIOS = ['postgres:bad signature'];

/** A measured round: so many requests, or (the guard's) so many seconds. */
type Size = { amount: number } | { duration: number };

const best = (results: LoadResult[]) => results.reduce((a, b) => (b.rps > a.rps ? b : a));

/**
 * Signed enrichment requests per second against a bare Fastify route answering 202 with the same
 * signing client, at 50 connections (the worker is off so the endpoint is measured alone).
 * Accepted requests on both databases; on PostgreSQL also the refusals (bad signature, bot at
 * quota, rate limited), which must write nothing. Throughput: each side's best round; p99: our
 * worst round. BENCH_ENRICHMENT=<dialect>:<scenario>,... runs only those.
 */
export async function benchEnrichment(): Promise<boolean> {
  header(`Enrichment endpoint: signed requests per second, ${CONNECTIONS} connections, best of ${ROUNDS} alternating rounds`);
  const only = process.env.BENCH_ENRICHMENT?.split(',') ?? (CHECK ? GUARDED_SCENARIOS : undefined);
  let met = true;
  for (const dialect of ['sqlite', 'postgres'] as const) {
    for (const scenario of SCENARIOS) {
      if (dialect === 'sqlite' && scenario.status !== 202) continue;
      if (only && !only.includes(`${dialect}:${scenario.name}`)) continue;
      // PostgreSQL accepts fewer requests per second: smaller rounds keep the benchmark inside its time budget.
      // The guard's rounds last two seconds each, however busy the machine.
      const measured = QUICK ? { amount: 50 } : CHECK ? { duration: 2 } : { amount: dialect === 'sqlite' || scenario.status !== 202 ? 12_000 : 6_000 };
      const { ours, reference, replay, shell } = await compare(dialect, scenario, QUICK ? 1_000 : CHECK ? 1_000 : 3_000, measured);
      const line = (name: string, r: LoadResult) =>
        console.log(
          `${name.padEnd(40)} ${fmt(r.rps).padStart(8)} req/s   p50 ${r.p50} ms   p99 ${r.p99} ms   errors ${r.errors}   ${fmt(r.perCpuSecond)} per CPU second`,
        );
      ours.forEach((result, round) => {
        line(`mothership (${dialect}, ${scenario.name}) #${round + 1}`, result);
        line(`bare Fastify 202 route #${round + 1}`, reference[round]!);
        if (replay[round]) line(`bare route, our answer #${round + 1}`, replay[round]!);
        if (shell[round]) line(`our shell, a route checking nothing #${round + 1}`, shell[round]!);
      });
      const failed = [...ours, ...replay, ...shell].find((result) => result.errors);
      if (failed) throw new Error(`${dialect}, ${scenario.name}: ${failed.errors} errors`);
      const label = `${dialect} ${scenario.name} vs bare route (best rounds)`;
      if (dialect === 'postgres') {
        // On PostgreSQL only the refusals have targets, against the shell's route that every
        // request passes (README.md, "Figures").
        ratio(label, best(ours).rps, best(reference).rps, null);
        if (shell.length) {
          if (replay.length) {
            ratio(`bare route sending our ${scenario.status} answer vs bare route`, best(replay).rps, best(reference).rps, null);
            ratio(
              `postgres ${scenario.name} vs bare route sending the same answer (what the checks and building the answer cost)`,
              best(ours).rps,
              best(replay).rps,
              null,
            );
          }
          met =
            ratio(
              `our HTTP shell, a route checking nothing, vs bare route (what any route of ours reaches; ${scenario.name} rounds)`,
              ...roundsCompared(shell, reference),
              0.75,
            ) && met;
          met = ratio(`postgres ${scenario.name} vs our shell's route checking nothing (what the checks cost)`, ...roundsCompared(ours, shell), 0.9) && met;
        }
        continue;
      }
      const throughputMet = ratio(label, best(ours).rps, best(reference).rps, 0.5);
      const p99 = Math.max(...ours.map((result) => result.p99));
      const p99Met = p99 < 20;
      console.log(`p99 ${p99} ms, worst round (target < 20 ms) ${p99Met ? 'MET' : 'NOT MET'}`);
      met = throughputMet && p99Met && met;
    }
  }
  return met;
}
