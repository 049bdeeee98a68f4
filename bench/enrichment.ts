import Fastify from 'fastify';
import type autocannon from 'autocannon';
import { randomBytes } from 'node:crypto';
import { signatureHeader } from '../src/enrichment/signing.js';
import { benchApp, load, type LoadResult } from './harness.js';
import { QUICK, fmt, header, ratio } from './lib.js';

const CONNECTIONS = 50;
const PER_BOT = 5;

/**
 * A request generator signing every request as a bot would (the same client cost for both targets).
 * Consecutive requests come from different bots, as many bots' requests would (one bot's five are
 * spread over the run, not sent at once), counting from request `first`; each match once.
 */
function signedRequests(bots: { id: string; shared_secret: string }[], first: number) {
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

/** Both targets get the same warm-up run first (JIT, connections, caches), then the measured run. */
async function warmThenMeasure(url: string, bots: { id: string; shared_secret: string }[], warmup: number, measured: number): Promise<LoadResult> {
  await load({ url, connections: CONNECTIONS, amount: warmup, requests: [signedRequests(bots, 0)] });
  return load({ url, connections: CONNECTIONS, amount: measured, requests: [signedRequests(bots, warmup)] });
}

/** The reference: a bare Fastify route answering 202, in the same process setup. */
async function bareRoute(bots: { id: string; shared_secret: string }[], warmup: number, measured: number): Promise<LoadResult> {
  const bare = Fastify();
  bare.post('/api/request-enrichment', async (_request, reply) => reply.code(202).send({ status: 'queued', estimated_wait_seconds: 5 }));
  const url = await bare.listen({ port: 0, host: '127.0.0.1' });
  try {
    return await warmThenMeasure(url, bots, warmup, measured);
  } finally {
    await bare.close();
  }
}

async function ours(dialect: 'sqlite' | 'postgres', botCount: number, warmup: number): Promise<{ result: LoadResult; bots: { id: string; shared_secret: string }[] }> {
  const { app, url, close } = await benchApp(dialect, { WORKER: process.env.BENCH_WORKER ?? 'off' });
  try {
    const bots = [];
    for (let b = 0; b < botCount; b++) bots.push(await app.enrichment.bots.create({ id: `bot-${b}`, name: `Bot ${b}` }));
    const now = new Date().toISOString();
    const matches = Array.from({ length: botCount * PER_BOT }, (_, index) => ({
      id: `m${index}`,
      status: 'completed' as const,
      replay: null,
      enrichment_requested_at: null,
      enrichment_status: null,
      commentary: null,
      enrichment_error: null,
      enrichment_completed_at: null,
      created_at: now,
    }));
    for (let start = 0; start < matches.length; start += 500) await app.database.db.insertInto('matches').values(matches.slice(start, start + 500)).execute();
    const result = await warmThenMeasure(url, bots, warmup, matches.length - warmup);
    const jobs = await app.database.db.selectFrom('enrichment_jobs').select((eb) => eb.fn.countAll<number>().as('count')).executeTakeFirstOrThrow();
    if (Number(jobs.count) !== matches.length) throw new Error(`expected ${matches.length} jobs, found ${jobs.count}`);
    return { result, bots };
  } finally {
    await close();
  }
}

/**
 * Accepted signed enrichment requests per second (distinct bots and completed matches, so the quota
 * never rejects; the worker is off so the endpoint is measured alone), against a bare Fastify route
 * answering 202 with the same signing client, at 50 connections.
 */
export async function benchEnrichment(): Promise<boolean> {
  header(`Enrichment endpoint: accepted signed requests per second, ${CONNECTIONS} connections`);
  const botCount = QUICK ? 40 : 3000;
  const warmup = QUICK ? 50 : 3000;
  let met = true;
  for (const dialect of ['sqlite', 'postgres'] as const) {
    const { result, bots } = await ours(dialect, botCount, warmup);
    const reference = await bareRoute(bots, warmup, result.total);
    const line = (name: string, r: LoadResult) =>
      console.log(`${name.padEnd(28)} ${fmt(r.rps).padStart(8)} req/s   p50 ${r.p50} ms   p99 ${r.p99} ms   non-2xx ${r.non2xx}   errors ${r.errors}`);
    line(`mothership (${dialect})`, result);
    line('bare Fastify 202 route', reference);
    if (result.non2xx || result.errors) throw new Error(`${dialect}: ${result.non2xx} non-2xx answers, ${result.errors} errors`);
    if (dialect === 'postgres') {
      // The issue sets its targets for SQLite; PostgreSQL is measured and reported (bench/README.md).
      ratio('postgres vs bare route', result.rps, reference.rps, null);
      continue;
    }
    const throughputMet = ratio('sqlite vs bare route', result.rps, reference.rps, 0.5);
    const p99Met = result.p99 < 20;
    console.log(`p99 ${result.p99} ms (target < 20 ms) ${p99Met ? 'MET' : 'NOT MET'}`);
    met = throughputMet && p99Met;
  }
  return met;
}
