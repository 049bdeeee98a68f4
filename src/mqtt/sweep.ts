import { randomUUID } from 'node:crypto';
import { clientOptions, connectBroker, connected, type MqttSettings } from './connection.js';
import type { Topics } from './topics.js';

const CONNECT_TIMEOUT_MS = 10_000;
/** A read that has not seen its probe by then is given up (a probe the broker's ACL drops). */
const READ_TIMEOUT_MS = 60_000;

/**
 * Whether a retained message on `topic` is the service's to clear when it did not publish it: any
 * config under its discovery topics, and its state topics; not availability or the generation
 * marker (published outside the record) nor commands (others publish those).
 */
export function sweepable(topics: Topics, topic: string): boolean {
  if (topics.isDiscovery(topic)) return true;
  if (!topic.startsWith(`${topics.base}/`)) return false;
  return topic !== topics.availability && topic !== topics.generation && !topic.startsWith(`${topics.generation}/`) && !topic.endsWith('/set');
}

/**
 * The topics under the service's own topics whose retained message `ours` does not recognise (a
 * fake, a ghost of an older release), read completely from a short-lived client: at QoS 0, since a
 * broker cuts a QoS 1 read-back short at its queue limit (Mosquitto's max_queued_messages, 1,000
 * by default), until a probe published after subscribing comes back (the broker queues the
 * retained messages to us before it). `signal` ends the read.
 */
export async function readForeign(
  settings: MqttSettings,
  clientId: string,
  topics: Topics,
  ours: (topic: string, payload: string) => boolean,
  signal: AbortSignal,
): Promise<string[]> {
  const client = connectBroker(clientOptions(settings, clientId));
  const end = () => void client.endAsync(true).catch(() => {});
  signal.addEventListener('abort', end);
  const timer = setTimeout(end, READ_TIMEOUT_MS).unref();
  const probe = `${topics.generation}/sweep`;
  const nonce = randomUUID();
  const foreign: string[] = [];
  try {
    await connected(client, CONNECT_TIMEOUT_MS);
    await new Promise<void>((resolve, reject) => {
      client.on('message', (topic, payload, packet) => {
        const text = payload.toString('utf8');
        if (topic === probe && text === nonce) resolve();
        else if (packet.retain && payload.length > 0 && sweepable(topics, topic) && !ours(topic, text)) foreign.push(topic);
      });
      client.once('close', () => reject(new Error('MQTT connection closed while reading retained messages')));
      client
        .subscribeAsync([...topics.discoveryFilters, `${topics.base}/#`], { qos: 0 })
        .then(() => client.publishAsync(probe, nonce, { qos: 0 }))
        .catch(reject);
    });
    return foreign;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', end);
    await client.endAsync(true).catch(() => {});
  }
}
