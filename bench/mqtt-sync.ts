import mqtt from 'mqtt';
import { benchApp } from './harness.js';
import { startBroker } from '../test/helpers/broker.js';
import { QUICK, fmt, header, table } from './lib.js';

const TOKEN = 'bench-admin-token-0123456789';
const SYNC_TARGET_MS = 10_000;
const RSS_TARGET_MB = 50;

/**
 * The MQTT full sync at building scale (5,000 persons, 500 zones, a tenth of the persons in a zone)
 * on a Mosquitto with its default configuration: the first sync onto an empty broker, the resync
 * after the broker restarted without persistence (it lost every retained message), and a reconnect
 * to a broker that kept them (the record of published topics says what it holds: almost nothing
 * is sent). Each is timed from the moment the service is (re)connected to the moment the broker
 * has forwarded the sync's last message to a subscriber; RSS is sampled every 20 ms against the
 * idle RSS before the first sync.
 */
export async function benchMqttSync(): Promise<boolean> {
  const persons = QUICK ? 200 : 5000;
  const zones = QUICK ? 20 : 500;
  header(`MQTT full sync: ${fmt(persons)} persons, ${fmt(zones)} zones, default Mosquitto`);
  // Not keeping the broker's log: it logs every packet (12 MB a sync), which would count as this process's RSS.
  const broker = await startBroker({ keepLog: false });
  const { app, url, close } = await benchApp('sqlite', { MQTT_BACKOFF_INITIAL_MS: '100', MQTT_BACKOFF_MAX_MS: '200' });
  const headers = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${url}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const watcher = await mqtt.connectAsync(broker.url, { reconnectPeriod: 100 });
  try {
    const ids = (prefix: string, count: number) => Array.from({ length: count }, (_, index) => `${prefix}${index}`);
    for (const batch of chunks(ids('z', zones), 50)) await Promise.all(batch.map((id) => call('POST', '/api/zones', { id, name: `Room ${id}` })));
    for (const batch of chunks(ids('p', persons), 50)) await Promise.all(batch.map((id) => call('POST', '/api/persons', { id, name: `Person ${id}` })));
    for (const batch of chunks(ids('p', persons / 10), 50))
      await Promise.all(batch.map((id, index) => call('POST', '/api/events', { type: 'zone.entry', person: id, zone: `z${index % zones}` })));
    const mid = app.mqtt.clientId.slice('mothership-'.length);
    // The sync's last message is the health state (then only clears, of which a fresh broker has none).
    const last = `mothership/${mid}/system/health`;
    const lastSeen: { at: number }[] = [];
    watcher.on('message', (topic) => topic === last && lastSeen.push({ at: performance.now() }));
    await watcher.subscribeAsync(last, { qos: 0 });

    globalThis.gc?.();
    const idle = process.memoryUsage().rss;
    let peak = idle;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const publishes = async () => Number(/^mothership_mqtt_publishes_total (\d+)/m.exec(await (await call('GET', '/metrics')).text())?.[1] ?? 0);
    const connectedAt = async () => {
      for (;;) {
        const { mqtt: status } = (await (await call('GET', '/api/settings/integration')).json()) as { mqtt: { status: { connected: boolean } } };
        if (status.status.connected) return performance.now();
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    };
    const syncMs = async (from: number) => {
      const seen = lastSeen.length;
      while (lastSeen.length === seen) await new Promise((resolve) => setTimeout(resolve, 5));
      return lastSeen.at(-1)!.at - from;
    };

    let before = await publishes();
    await call('POST', '/api/settings/integration', { mqtt: { enabled: true, broker_url: broker.url } });
    const first = await syncMs(await connectedAt());
    const firstMessages = (await publishes()) - before;
    const firstPeak = peak - idle;

    await broker.stop();
    await broker.start();
    peak = process.memoryUsage().rss;
    before = await publishes();
    const restarted = await syncMs(await connectedAt());
    const restartMessages = (await publishes()) - before;

    // A reconnect to a broker that kept everything: the health state is unchanged, so wait for the
    // flush to go quiet instead (no publish for 500 ms after online).
    await call('POST', '/api/settings/integration', { mqtt: { enabled: false } });
    before = await publishes();
    await call('POST', '/api/settings/integration', { mqtt: { enabled: true } });
    const reconnectedAt = await connectedAt();
    let quietSince = performance.now();
    let count = await publishes();
    while (performance.now() - quietSince < 500) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const now = await publishes();
      if (now !== count) [count, quietSince] = [now, performance.now()];
    }
    const kept = quietSince - reconnectedAt;
    clearInterval(sampler);

    table([
      { name: 'first sync (empty broker)', value: first, unit: 'ms', note: `${fmt(firstMessages)} messages` },
      { name: 'resync after a broker restart (lost)', value: restarted, unit: 'ms', note: `${fmt(restartMessages)} messages` },
      { name: 'reconnect (broker kept them)', value: kept, unit: 'ms', note: `${fmt(count - before)} messages, to the last one` },
      { name: 'idle RSS before the first sync', value: idle / 2 ** 20, unit: 'MB' },
      { name: 'RSS above idle, first sync', value: firstPeak / 2 ** 20, unit: 'MB' },
      { name: 'RSS above idle, whole run', value: (peak - idle) / 2 ** 20, unit: 'MB' },
    ]);
    const met = Math.max(first, restarted) <= SYNC_TARGET_MS && (peak - idle) / 2 ** 20 <= RSS_TARGET_MB;
    console.log(`Targets: sync <= ${SYNC_TARGET_MS} ms, RSS <= idle + ${RSS_TARGET_MB} MB: ${met ? 'MET' : 'NOT MET'}${QUICK ? ' (quick size)' : ''}`);
    return met || QUICK;
  } finally {
    await watcher.endAsync(true);
    await close();
    await broker.destroy();
  }
}

function chunks<T>(items: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, index) => items.slice(index * size, (index + 1) * size));
}
