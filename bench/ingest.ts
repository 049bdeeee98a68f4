import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import Fastify from 'fastify';
import { benchApp, load, type LoadResult } from './harness.js';
import { startBroker } from '../test/helpers/broker.js';
import { QUICK, fmt, header, ratio } from './lib.js';

const WRITERS = [1, 8, 32];
/** Ours (each database) and the bare route alternate over this many measured rounds. */
const ROUNDS = QUICK ? 1 : 3;
/** More persons than writers: concurrent entries rarely wait for one person's row lock. */
const PERSONS = 64;
/** How long the fan-out of a round may take to reach the webhook receiver. */
const DRAIN_MS = 120_000;
/** BENCH_INGEST=postgres: one database only (a before/after comparison), without the ratio between them. */
const DIALECTS = (process.env.BENCH_INGEST?.split(',') ?? ['sqlite', 'postgres']) as Dialect[];

type Dialect = 'sqlite' | 'postgres';
/** A run: so many requests (the warm-up), or so many seconds (a measured round). */
type Size = { amount: number } | { duration: number };

/** The webhook receiver: counts what each service delivered (the path names the service). */
async function webhookReceiver() {
  const received: Record<string, number> = {};
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received[request.url!] = (received[request.url!] ?? 0) + 1;
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** A service with MQTT on the private broker and a webhook to the receiver, PERSONS persons and two zones. */
async function ingestService(dialect: Dialect, broker: string, hook: string) {
  // The outbox's bound above what the rounds append: every event is delivered, and the drain time
  // below is that of all of them (at its default, 10,000, the bound abandoned some at 32 writers).
  const service = await benchApp(dialect, { WEBHOOK_PENDING_MAX: '1000000' });
  const { app } = service;
  await app.settings.update({
    mqtt: { enabled: true, broker_url: broker, topic_root: `bench${randomBytes(4).toString('hex')}` },
    webhook: { enabled: true, url: hook },
  });
  const deadline = Date.now() + 10_000;
  while (!app.mqtt.status().connected) {
    if (Date.now() > deadline) throw new Error(`${dialect}: the service did not connect to the broker`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const zones = [(await app.presence.createZone({ name: 'Kitchen' })).id, (await app.presence.createZone({ name: 'Hall' })).id] as [string, string];
  const persons: string[] = [];
  for (let p = 0; p < PERSONS; p++) persons.push((await app.presence.createPerson({ name: `Person ${p}` })).id);
  // A sensor node holds a token of scope `ingest`, not the admin token.
  const token = await service.token('ingest');
  let sent = 0;
  const firstSeq = await app.events.lastSeq();
  return {
    ...service,
    run: async (writers: number, size: Size) => {
      const result = await load({ url: service.url, connections: writers, ...size }, undefined, { persons, zones, token, first: sent });
      sent += result.total;
      return result;
    },
    /** Log events appended by the measured runs. */
    appended: async () => (await app.events.lastSeq()) - firstSeq,
  };
}

/**
 * Event ingest, the headline figure (README.md, "Figures"): zone entries POSTed to /api/events, each
 * moving a person between two zones (a zone.exit and a zone.entry in the log, the person's row
 * written, each event published to MQTT on a private Mosquitto and queued for a webhook receiver),
 * on SQLite and PostgreSQL at 1, 8 and 32 writers (connections of a load generator in its own
 * process), against a bare Fastify route taking the same requests. The databases and the bare route
 * alternate round by round; after each of our rounds its fan-out drains before the next starts, so no
 * round pays for another's deliveries. Throughput: best round; p99: worst round.
 */
export async function benchIngest(): Promise<boolean> {
  header(`Event ingest: POST /api/events zone entries with MQTT and webhook fan-out, best of ${ROUNDS} alternating rounds`);
  const privateBroker = process.env.BENCH_MQTT_URL ? null : await startBroker();
  const broker = process.env.BENCH_MQTT_URL ?? privateBroker!.url;
  const receiver = await webhookReceiver();
  const services: Partial<Record<Dialect, Awaited<ReturnType<typeof ingestService>>>> = {};
  const bare = Fastify();
  bare.post('/api/events', async (_request, reply) => reply.code(202).send({ accepted: true }));
  const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });
  const bareRun = (writers: number, size: Size) =>
    load({ url: bareUrl, connections: writers, ...size }, undefined, { persons: ['p'], zones: ['a', 'b'], token: 'not-checked', first: 0 });
  let met = true;
  try {
    for (const dialect of DIALECTS) services[dialect] = await ingestService(dialect, broker, `${receiver.url}/${dialect}`);
    /** Waits until `dialect`'s outbox has delivered every event appended so far. */
    const drained = async (dialect: Dialect) => {
      const { app } = services[dialect]!;
      const pending = async () =>
        Number(
          (
            await app.database.db
              .selectFrom('webhook_deliveries')
              .select((eb) => eb.fn.countAll<number>().as('count'))
              .where('state', '=', 'pending')
              .executeTakeFirstOrThrow()
          ).count,
        );
      const deadline = Date.now() + DRAIN_MS;
      for (let left = await pending(); left > 0; left = await pending()) {
        if (Date.now() > deadline) throw new Error(`${dialect}: ${left} webhook deliveries still pending after ${DRAIN_MS} ms`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const warmup = QUICK ? 8 : 500;
    for (const dialect of DIALECTS) {
      await services[dialect]!.run(8, { amount: warmup });
      await drained(dialect);
    }
    await bareRun(8, { amount: warmup });
    const best: Record<Dialect | 'bare', Record<number, LoadResult>> = { sqlite: {}, postgres: {}, bare: {} };
    const line = (name: string, writers: number, r: LoadResult, drainMs?: number) =>
      console.log(
        `${name.padEnd(22)} ${String(writers).padStart(2)} writers ${fmt(r.rps).padStart(7)} entries/s   p50 ${r.p50} ms   p99 ${r.p99} ms   non-2xx ${r.non2xx}   errors ${r.errors}   ${fmt(r.perCpuSecond)} per CPU second${drainMs === undefined ? '' : `   fan-out drained ${fmt(drainMs)} ms after the last answer`}`,
      );
    for (const writers of WRITERS) {
      const size = { duration: QUICK ? 1 : 5 };
      const worstP99: Record<Dialect, number> = { sqlite: 0, postgres: 0 };
      for (let round = 0; round < ROUNDS; round++) {
        for (const dialect of DIALECTS) {
          const result = await services[dialect]!.run(writers, size);
          const answered = performance.now();
          await drained(dialect);
          line(`${dialect} #${round + 1}`, writers, result, performance.now() - answered);
          if (result.non2xx || result.errors) throw new Error(`${dialect}: ${JSON.stringify(result.statuses)}, ${result.errors} errors`);
          if (!best[dialect][writers] || result.rps > best[dialect][writers]!.rps) best[dialect][writers] = result;
          worstP99[dialect] = Math.max(worstP99[dialect], result.p99);
        }
        const reference = await bareRun(writers, size);
        line(`bare Fastify route #${round + 1}`, writers, reference);
        if (!best.bare[writers] || reference.rps > best.bare[writers]!.rps) best.bare[writers] = reference;
      }
      console.log(`p99 at ${writers} writers, worst round: ${DIALECTS.map((dialect) => `${dialect} ${worstP99[dialect]} ms`).join(', ')}`);
    }
    for (const dialect of DIALECTS)
      console.log(
        `${dialect}: ${fmt(await services[dialect]!.appended())} log events appended, ${fmt(receiver.received[`/${dialect}`] ?? 0)} webhook deliveries received`,
      );
    // Every entry is two events in the log (the exit from the other zone, the entry).
    console.log(`\nzone entries/s, best round (log events/s: twice that)`);
    console.log(`writers ${WRITERS.map((w) => String(w).padStart(8)).join('')}`);
    for (const side of [...DIALECTS, 'bare' as const]) console.log(`${side.padEnd(8)}${WRITERS.map((w) => fmt(best[side][w]!.rps).padStart(8)).join('')}`);
    for (const writers of WRITERS) {
      for (const dialect of DIALECTS)
        ratio(`${dialect} zone entries at ${writers} writers vs bare route`, best[dialect][writers]!.rps, best.bare[writers]!.rps, null);
      if (DIALECTS.length < 2) continue;
      met =
        ratio(`postgres vs sqlite zone entries at ${writers} writers`, best.postgres[writers]!.rps, best.sqlite[writers]!.rps, writers === 8 ? 0.5 : null) &&
        met;
    }
    return met;
  } finally {
    await bare.close();
    for (const service of Object.values(services)) await service.close();
    await receiver.close();
    await privateBroker?.destroy();
  }
}
