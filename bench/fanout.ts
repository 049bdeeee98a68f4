import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import Fastify from 'fastify';
import mqtt from 'mqtt';
import { benchApp } from './harness.js';
import { startBroker } from '../test/helpers/broker.js';
import { QUICK, fmt, header, percentile, ratio } from './lib.js';

const TOKEN = 'bench-admin-token-0123456789';

/** Events in flight at once in the throughput phase, as for the raw publishing reference. */
const WINDOW = 100;

/** Runs `count` operations with `WINDOW` of them in flight: each one done starts the next. */
async function inWindow(count: number, operation: () => Promise<unknown>): Promise<void> {
  let started = 0;
  await Promise.all(
    Array.from({ length: WINDOW }, async () => {
      while (started++ < count) await operation();
    }),
  );
}

/** The share of one core this process used over `ms` of wall time. */
async function cpuShare(ms: number): Promise<number> {
  const before = process.cpuUsage();
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / 1000 / (performance.now() - started);
}

/**
 * Dashboards: `count` open event streams (clients in this process, reading every frame). The CPU of
 * the process while they and the service are idle (the service still looks for other processes'
 * events), against none open; then a burst of events, timed until every stream has them all.
 */
export async function streamPhase(url: string, count: number, seconds: number): Promise<void> {
  const idleAlone = await cpuShare(seconds * 1000);
  let frames = 0;
  const requests: http.ClientRequest[] = [];
  await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<void>((resolve, reject) => {
          const request = http.get(`${url}/api/events/stream`, { headers: { authorization: `Bearer ${TOKEN}` } }, (response) => {
            if (response.statusCode !== 200) reject(new Error(`stream answered ${response.statusCode}`));
            response.setEncoding('utf8');
            // Every frame starts a line with `id: `; the last characters carry a start split between chunks.
            let carry = '';
            response.on('data', (chunk: string) => {
              const text = carry + chunk;
              frames += text.split('\nid: ').length - 1;
              carry = text.slice(-4);
            });
            resolve();
          });
          request.on('error', reject);
          requests.push(request);
        }),
    ),
  );
  try {
    const idleStreams = await cpuShare(seconds * 1000);
    console.log(`${fmt(count)} idle event streams: process CPU ${(idleStreams * 100).toFixed(1)} % of a core (none open: ${(idleAlone * 100).toFixed(1)} %)`);
    const events = QUICK ? 20 : 200;
    const agent = new http.Agent({ keepAlive: true, maxSockets: 10 });
    const started = performance.now();
    let sent = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (sent++ < events)
          await new Promise<void>((resolve) => {
            const request = http.request(
              `${url}/api/events`,
              { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } },
              (response) => response.resume().on('end', resolve),
            );
            request.on('error', () => resolve());
            request.end(JSON.stringify({ type: 'anomaly.detected', detail: { stream: true } }));
          });
      }),
    );
    const deadline = Date.now() + 60_000;
    while (frames < events * count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    const elapsed = (performance.now() - started) / 1000;
    agent.destroy();
    console.log(
      `${fmt(events)} events to ${fmt(count)} streams: ${fmt(frames)}/${fmt(events * count)} frames in ${elapsed.toFixed(2)} s (${fmt(frames / elapsed)} frames/s)`,
    );
  } finally {
    for (const request of requests) request.destroy();
  }
}

/**
 * Event fan-out: anomaly events ingested over HTTP, received by an MQTT subscriber on Mosquitto and
 * by a local webhook receiver. Three phases: throughput (events sent as fast as a window of 100 in
 * flight allows, rate measured where the subscriber receives them) against raw mqtt.js QoS 1
 * publishing to the same broker with the same window; then latency at a steady 1,000 events/s,
 * end to end from the HTTP send, one event every millisecond; then 800 open event streams
 * (`streamPhase`).
 */
export async function benchFanout(): Promise<boolean> {
  header('Event fan-out: HTTP ingest -> MQTT subscriber and webhook receiver');
  const seconds = QUICK ? 1 : 10;
  const ratePerSecond = 1000;
  const paced = seconds * ratePerSecond;
  const burst = QUICK ? 1000 : 20000;

  // A private Mosquitto (or BENCH_MQTT_URL): the retained configs the service publishes must not
  // appear as devices in a Home Assistant that uses a shared broker.
  const privateBroker = process.env.BENCH_MQTT_URL ? null : await startBroker();
  const BROKER = process.env.BENCH_MQTT_URL ?? privateBroker!.url;

  // Reference: raw QoS 1 publishes, a sliding window of WINDOW in flight (a new one as each is acknowledged).
  const rawClient = await mqtt.connectAsync(BROKER);
  const rawTopic = `bench/${randomBytes(4).toString('hex')}/raw`;
  const rawStarted = performance.now();
  await inWindow(burst, () => rawClient.publishAsync(rawTopic, '{"event_type":"anomaly.detected"}', { qos: 1 }));
  const rawRate = burst / ((performance.now() - rawStarted) / 1000);
  await rawClient.endAsync();

  let mqttLatency: number[] = [];
  let webhookLatency: number[] = [];
  let lastMqtt = 0;
  const receiver = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      webhookLatency.push(performance.now() - (JSON.parse(body).detail.sent as number));
      response.end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const root = `bench${randomBytes(4).toString('hex')}`;
  const streams = QUICK ? 50 : 800;
  // The outbox's bound above the burst: the throughput phase measures how fast the dispatcher
  // delivers every event, not which of them the bound abandons (it keeps 10,000 by default).
  const { app, url, close } = await benchApp('sqlite', {
    EVENT_STREAMS_MAX: String(streams),
    EVENT_STREAMS_PER_CLIENT: String(streams),
    WEBHOOK_PENDING_MAX: String(2 * burst),
  });
  const subscriber = await mqtt.connectAsync(BROKER);
  const agent = new http.Agent({ keepAlive: true, maxSockets: WINDOW });
  try {
    await app.settings.update({
      mqtt: { enabled: true, broker_url: BROKER, topic_root: root },
      webhook: { enabled: true, url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` },
    });
    const deadline = Date.now() + 5000;
    while (!app.mqtt.status().connected && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    subscriber.on('message', (_topic, payload) => {
      lastMqtt = performance.now();
      mqttLatency.push(lastMqtt - (JSON.parse(payload.toString()).detail.sent as number));
    });
    await subscriber.subscribeAsync(`${root}/+/anomaly`, { qos: 1 });

    const sendTo = (target: string) => () =>
      new Promise<void>((resolve) => {
        const body = JSON.stringify({ type: 'anomaly.detected', detail: { sent: performance.now() } });
        const request = http.request(
          `${target}/api/events`,
          { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } },
          (response) => {
            response.resume();
            response.on('end', resolve);
          },
        );
        request.on('error', () => resolve());
        request.end(body);
      });
    const send = sendTo(url);
    const received = async (count: number) => {
      const waitUntil = Date.now() + 20_000;
      while ((mqttLatency.length < count || webhookLatency.length < count) && Date.now() < waitUntil) await new Promise((resolve) => setTimeout(resolve, 20));
    };
    const report = (name: string, samples: number[], total: number) => {
      const sorted = [...samples].sort((a, b) => a - b);
      console.log(
        `${name.padEnd(34)} ${fmt(samples.length).padStart(7)}/${total} received   p50 ${percentile(sorted, 50).toFixed(1)} ms   p99 ${percentile(sorted, 99).toFixed(1)} ms`,
      );
      return percentile(sorted, 99);
    };

    // The ceiling of HTTP ingestion itself: a bare Fastify route taking the same requests.
    const bare = Fastify();
    bare.post('/api/events', async (_request, reply) => reply.code(202).send({ accepted: true }));
    const bareUrl = await bare.listen({ port: 0, host: '127.0.0.1' });
    const bareStarted = performance.now();
    await inWindow(burst, sendTo(bareUrl));
    const bareRate = burst / ((performance.now() - bareStarted) / 1000);
    await bare.close();

    // Phase 1: throughput, WINDOW events in flight.
    const burstStarted = performance.now();
    await inWindow(burst, send);
    await received(burst);
    const fanoutRate = mqttLatency.length / ((lastMqtt - burstStarted) / 1000);
    report('throughput phase: MQTT subscriber', mqttLatency, burst);
    report('throughput phase: webhook receiver', webhookLatency, burst);
    console.log(
      `events delivered to the MQTT subscriber ${fmt(fanoutRate)}/s; raw mqtt.js QoS 1 publishing ${fmt(rawRate)} msgs/s; bare Fastify route taking the same POSTs ${fmt(bareRate)} req/s (${WINDOW} in flight each)`,
    );
    const rateMet = ratio('fan-out rate vs raw publish rate', fanoutRate, rawRate, 0.7) && mqttLatency.length === burst;
    ratio('fan-out rate vs HTTP ingestion ceiling (bare route)', fanoutRate, bareRate, null);

    // Phase 2: latency at a steady 1,000 events/s: one event every millisecond, on schedule (a late
    // timer sends the events it owes at once).
    mqttLatency = [];
    webhookLatency = [];
    const started = performance.now();
    const inFlight: Promise<void>[] = [];
    while (inFlight.length < paced) {
      const owed = Math.min(paced, Math.floor(((performance.now() - started) * ratePerSecond) / 1000) + 1);
      while (inFlight.length < owed) inFlight.push(send());
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    await Promise.all(inFlight);
    await received(paced);
    const mqttP99 = report('1,000 events/s: MQTT subscriber', mqttLatency, paced);
    const webhookP99 = report('1,000 events/s: webhook receiver', webhookLatency, paced);
    const p99Met = mqttP99 < 10 && mqttLatency.length === paced;
    console.log(`MQTT p99 ${mqttP99.toFixed(1)} ms at 1,000 events/s (target < 10 ms) ${p99Met ? 'MET' : 'NOT MET'}; webhook p99 ${webhookP99.toFixed(1)} ms`);

    // Phase 3: dashboards.
    await streamPhase(url, streams, QUICK ? 1 : 5);
    return rateMet && p99Met;
  } finally {
    agent.destroy();
    await subscriber.endAsync();
    await close();
    receiver.close();
    await privateBroker?.destroy();
  }
}
