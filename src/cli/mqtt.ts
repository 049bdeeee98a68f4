import { setTimeout as delay } from 'node:timers/promises';
import { ID_PATTERN, type Config } from '../config.js';
import { SecretBox } from '../crypto.js';
import { Database } from '../db/index.js';
import { clientOptions, connectBroker, connected, describeMqttError } from '../mqtt/connection.js';
import { Topics } from '../mqtt/topics.js';
import { createEventPipeline } from '../pipeline.js';
import type { Output } from './io.js';

/** Retained messages arrive right after the subscription is acknowledged; this is ample on a LAN. */
const COLLECT_MS = 1000;
const CONNECT_TIMEOUT_MS = 10_000;

/**
 * `mothership mqtt cleanup --installation ID`: clears, on the configured broker, every retained
 * discovery config and state topic a previous installation id left (a lost DATA_DIR gives a new id,
 * and Home Assistant would keep the old device forever).
 */
export async function mqttCleanupCommand(config: Config, installation: string, io: Output): Promise<number> {
  if (!ID_PATTERN.test(installation)) {
    io.err(`--installation must be an installation id (${ID_PATTERN}), got "${installation}"`);
    return 2;
  }
  if (installation === config.mothershipId) {
    io.err(`"${installation}" is this installation's own id: its entities are live, not left over`);
    return 2;
  }
  const database = await Database.open(config);
  const settings = await createEventPipeline(database, new SecretBox(config.secretsKey))
    .settings.get()
    .finally(() => database.close());
  if (!settings.mqtt.broker_url) {
    io.err('no MQTT broker is configured (settings, mqtt.broker_url)');
    return 2;
  }
  const topics = new Topics(settings.mqtt.topic_root, installation, settings.mqtt.discovery_prefix);
  const client = connectBroker(clientOptions(settings.mqtt, `mothership-${config.mothershipId}-cleanup`));
  try {
    await connected(client, CONNECT_TIMEOUT_MS);
    const retained = new Set<string>();
    client.on('message', (topic, payload, packet) => {
      if (packet.retain && payload.length > 0) retained.add(topic);
    });
    const filters = [...topics.discoveryFilters, `${topics.base}/#`];
    await client.subscribeAsync(filters, { qos: 1 });
    await delay(COLLECT_MS);
    await client.unsubscribeAsync(filters);
    await Promise.all([...retained].map((topic) => client.publishAsync(topic, '', { qos: 1, retain: true })));
    io.out(`cleared ${retained.size} retained message${retained.size === 1 ? '' : 's'} of installation ${installation} (${filters.join(', ')})`);
    return 0;
  } catch (error) {
    io.err(`could not reach the broker: ${describeMqttError(error as Error & { code?: string | number })}`);
    return 1;
  } finally {
    await client.endAsync().catch(() => {});
  }
}
