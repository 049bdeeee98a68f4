import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import mqtt from 'mqtt';
import { benchApp } from './harness.js';
import { QUICK, fmt, header, percentile, ratio } from './lib.js';

const BROKER = process.env.BENCH_MQTT_URL ?? 'mqtt://127.0.0.1:1883';
const TOKEN = 'bench-admin-token-0123456789';

/**
 * Event fan-out: anomaly events ingested over HTTP at a steady 1,000 events/s, received by an MQTT
 * subscriber on Mosquitto and by a local webhook receiver; end-to-end latency from the HTTP send.
 * The reference is raw mqtt.js QoS 1 publishing to the same broker at its full rate.
 */
export async function benchFanout(): Promise<boolean> {
  header('Event fan-out: HTTP ingest -> MQTT subscriber and webhook receiver');
  const seconds = QUICK ? 1 : 10;
  const ratePerSecond = 1000;
  const total = seconds * ratePerSecond;

  // Reference: raw QoS 1 publishes, 100 in flight.
  const rawClient = await mqtt.connectAsync(BROKER);
  const rawTopic = `bench/${randomBytes(4).toString('hex')}/raw`;
  const rawCount = QUICK ? 2000 : 20000;
  const rawStarted = performance.now();
  for (let sent = 0; sent < rawCount; sent += 100) await Promise.all(Array.from({ length: 100 }, () => rawClient.publishAsync(rawTopic, '{"event_type":"anomaly.detected"}', { qos: 1 })));
  const rawRate = rawCount / ((performance.now() - rawStarted) / 1000);
  await rawClient.endAsync();

  const mqttLatency: number[] = [];
  const webhookLatency: number[] = [];
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
  const { app, url, close } = await benchApp('sqlite');
  const subscriber = await mqtt.connectAsync(BROKER);
  try {
    await app.settings.update({
      mqtt: { enabled: true, broker_url: BROKER, topic_root: root },
      webhook: { enabled: true, url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook` },
    });
    const deadline = Date.now() + 5000;
    while (!app.mqtt.status().connected && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    subscriber.on('message', (_topic, payload) => mqttLatency.push(performance.now() - (JSON.parse(payload.toString()).detail.sent as number)));
    await subscriber.subscribeAsync(`${root}/+/anomaly`, { qos: 1 });

    const agent = new http.Agent({ keepAlive: true, maxSockets: 32 });
    const send = () =>
      new Promise<void>((resolve) => {
        const body = JSON.stringify({ type: 'anomaly.detected', detail: { sent: performance.now() } });
        const request = http.request(`${url}/api/events`, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` } }, (response) => {
          response.resume();
          response.on('end', resolve);
        });
        request.on('error', () => resolve());
        request.end(body);
      });
    const started = performance.now();
    const inFlight: Promise<void>[] = [];
    for (let tick = 0; tick < seconds * 100; tick++) {
      // 10 events every 10 ms: a steady 1,000 events/s.
      for (let n = 0; n < ratePerSecond / 100; n++) inFlight.push(send());
      const next = started + (tick + 1) * 10;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - performance.now())));
    }
    await Promise.all(inFlight);
    const waitUntil = Date.now() + 10_000;
    while ((mqttLatency.length < total || webhookLatency.length < total) && Date.now() < waitUntil) await new Promise((resolve) => setTimeout(resolve, 20));
    const elapsed = (performance.now() - started) / 1000;
    agent.destroy();

    const report = (name: string, samples: number[]) => {
      const sorted = [...samples].sort((a, b) => a - b);
      console.log(`${name.padEnd(22)} ${fmt(samples.length).padStart(7)}/${total} received   p50 ${percentile(sorted, 50).toFixed(1)} ms   p99 ${percentile(sorted, 99).toFixed(1)} ms`);
      return percentile(sorted, 99);
    };
    const mqttP99 = report('MQTT subscriber', mqttLatency);
    const webhookP99 = report('webhook receiver', webhookLatency);
    const deliveredRate = mqttLatency.length / elapsed;
    console.log(`MQTT messages delivered ${fmt(deliveredRate)}/s at an offered 1,000 events/s; raw mqtt.js QoS 1 publishing: ${fmt(rawRate)} msgs/s`);
    const rateMet = ratio('delivered rate vs offered rate', mqttLatency.length, total, 0.999);
    ratio('offered 1,000 events/s vs raw publish capacity (headroom, no target)', ratePerSecond, rawRate, 0);
    const p99Met = mqttP99 < 10;
    console.log(`MQTT p99 ${mqttP99.toFixed(1)} ms (target < 10 ms) ${p99Met ? 'MET' : 'NOT MET'}; webhook p99 ${webhookP99.toFixed(1)} ms`);
    return rateMet && p99Met;
  } finally {
    await subscriber.endAsync();
    await close();
    receiver.close();
  }
}
