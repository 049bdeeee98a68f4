import Fastify from 'fastify';
import type autocannon from 'autocannon';
import { randomBytes } from 'node:crypto';
import { signatureHeader } from '../src/enrichment/signing.js';
import { benchApp, load, type LoadResult } from './harness.js';
import { QUICK, fmt, header, ratio } from './lib.js';

const CONNECTIONS = 50;
const PER_BOT = 5;
/** Ours and the reference alternate over this many measured rounds, as the micro-benchmarks do. */
const ROUNDS = 3;

type Bot = { id: string; shared_secret: string };

/**
 * A request generator signing every request as a bot would (the same client cost for both targets).
 * Consecutive requests come from different bots, as many bots' requests would (one bot's five are
 * spread over the run, not sent at once), counting from request `first`; each match once.
 */
function signedRequests(bots: Bot[], first: number) {
  let counter = first;
  return {
    method: 'POST' as const,
    path: '/api/request-enrichment',
    setupRequest: (request: autocannon.Request) => {
      const index = counter++;
      const botIndex = index % bots.length;
      const bot = bots[botIndex]!;
      const body = JSON.stringify({ match_id: `m${botIndex * PER_BOT + Math.floor(index / bots.length)}` });
      const timestamp = String(Math.floor(Date.now() / 1000));
      const nonce = randomBytes(16).toString('hex');
      const signature = signatureHeader(bot.shared_secret, { method: 'POST', pathAndQuery: '/api/request-enrichment', timestamp, nonce, body });
      return {
        ...request,
        body,
        headers: { 'content-type': 'application/json', 'x-bot-id': bot.id, 'x-bot-timestamp': timestamp, 'x-bot-nonce': nonce, 'x-bot-signature': signature },
      };
    },
  };
}

/** The reference: a bare Fastify route answering 202, in the same process as the service. */
async function bareRoute() {
  const bare = Fastify();
  bare.post('/api/request-enrichment', async (_request, reply) => reply.code(202).send({ status: 'queued', estimated_wait_seconds: 5 }));
  return { url: await bare.listen({ port: 0, host: '127.0.0.1' }), close: () => bare.close() };
}

/** A service with `botCount` bots and PER_BOT completed, never requested matches for each. */
async function seededService(dialect: 'sqlite' | 'postgres', botCount: number) {
  const service = await benchApp(dialect, { WORKER: process.env.BENCH_WORKER ?? 'off' });
  const bots: Bot[] = [];
  for (let b = 0; b < botCount; b++) bots.push(await service.app.enrichment.bots.create({ id: `bot-${b}`, name: `Bot ${b}` }));
  const now = new Date().toISOString();
  const matches = Array.from({ length: botCount * PER_BOT }, (_, index) => ({
    id: `m${index}`,
    status: 'completed' as const,
    replay: '{"players":["a","b"]}',
    enrichment_requested_at: null,
    enrichment_status: null,
    commentary: null,
    enrichment_error: null,
    enrichment_completed_at: null,
    created_at: now,
  }));
  for (let start = 0; start < matches.length; start += 500) await service.app.database.db.insertInto('matches').values(matches.slice(start, start + 500)).execute();
  return { ...service, bots };
}

/**
 * Both targets get the same warm-up run, then they alternate over ROUNDS measured runs of the same
 * size: machine noise and JIT order favour neither. Every request to the service is a fresh match.
 */
async function compare(dialect: 'sqlite' | 'postgres', warmup: number, measured: number): Promise<{ ours: LoadResult[]; reference: LoadResult[] }> {
  const service = await seededService(dialect, (warmup + ROUNDS * measured) / PER_BOT);
  const bare = await bareRoute();
  try {
    let sent = 0;
    const oursRun = async (amount: number) => {
      const result = await load({ url: service.url, connections: CONNECTIONS, amount, requests: [signedRequests(service.bots, sent)] });
      sent += amount;
      return result;
    };
    const referenceRun = (amount: number) => load({ url: bare.url, connections: CONNECTIONS, amount, requests: [signedRequests(service.bots, 0)] });
    await oursRun(warmup);
    await referenceRun(warmup);
    const ours: LoadResult[] = [];
    const reference: LoadResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      ours.push(await oursRun(measured));
      reference.push(await referenceRun(measured));
    }
    const jobs = await service.app.database.db.selectFrom('enrichment_jobs').select((eb) => eb.fn.countAll<number>().as('count')).executeTakeFirstOrThrow();
    if (Number(jobs.count) !== sent) throw new Error(`expected ${sent} jobs, found ${jobs.count}`);
    return { ours, reference };
  } finally {
    await bare.close();
    await service.close();
  }
}

const best = (results: LoadResult[]) => results.reduce((a, b) => (b.rps > a.rps ? b : a));

/**
 * Accepted signed enrichment requests per second (distinct bots and completed matches, so the quota
 * never rejects; the worker is off so the endpoint is measured alone), against a bare Fastify route
 * answering 202 with the same signing client, at 50 connections. Throughput: each side's best round;
 * p99: our worst round.
 */
export async function benchEnrichment(): Promise<boolean> {
  header(`Enrichment endpoint: accepted signed requests per second, ${CONNECTIONS} connections, best of ${ROUNDS} alternating rounds`);
  let met = true;
  for (const dialect of ['sqlite', 'postgres'] as const) {
    // PostgreSQL runs about a tenth as fast: smaller rounds keep the benchmark inside its time budget.
    const measured = QUICK ? 50 : dialect === 'sqlite' ? 12_000 : 4_000;
    const { ours, reference } = await compare(dialect, QUICK ? 50 : 3_000, measured);
    const line = (name: string, r: LoadResult) =>
      console.log(`${name.padEnd(28)} ${fmt(r.rps).padStart(8)} req/s   p50 ${r.p50} ms   p99 ${r.p99} ms   non-2xx ${r.non2xx}   errors ${r.errors}`);
    ours.forEach((result, round) => {
      line(`mothership (${dialect}) #${round + 1}`, result);
      line(`bare Fastify 202 route #${round + 1}`, reference[round]!);
    });
    const failed = ours.find((result) => result.non2xx || result.errors);
    if (failed) throw new Error(`${dialect}: ${failed.non2xx} non-2xx answers, ${failed.errors} errors`);
    if (dialect === 'postgres') {
      // The issue sets its targets for SQLite; PostgreSQL is measured and reported (bench/README.md).
      ratio('postgres vs bare route (best rounds)', best(ours).rps, best(reference).rps, null);
      continue;
    }
    const throughputMet = ratio('sqlite vs bare route (best rounds)', best(ours).rps, best(reference).rps, 0.5);
    const p99 = Math.max(...ours.map((result) => result.p99));
    const p99Met = p99 < 20;
    console.log(`p99 ${p99} ms, worst round (target < 20 ms) ${p99Met ? 'MET' : 'NOT MET'}`);
    met = throughputMet && p99Met;
  }
  return met;
}
