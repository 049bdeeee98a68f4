import { randomUUID } from 'node:crypto';
import { clientOptions, connectBroker, connected, type MqttSettings, ONE_OFF_CONNECT_TIMEOUT_MS } from './connection.js';

/** A read that has not seen its probe by then is given up (a probe the broker's ACL drops). */
const READ_TIMEOUT_MS = 60_000;

/**
 * The topics of every retained message under `filters` that `keep` picks, however many, read from a
 * short-lived client: at QoS 0, since a broker cuts a QoS 1 read-back short at its queue limit
 * (Mosquitto's max_queued_messages, 1,000 by default), until `probe` (a topic under `filters`),
 * published after subscribing, comes back: the broker queues the retained messages to us before it,
 * so no wait is guessed. `signal` ends the read. The sweep and `mothership mqtt cleanup` both read so.
 */
export async function readRetainedTopics(
  settings: MqttSettings,
  clientId: string,
  filters: string[],
  probe: string,
  keep: (topic: string, payload: string) => boolean,
  signal?: AbortSignal,
): Promise<string[]> {
  const client = await connectBroker(clientOptions(settings, clientId));
  const end = () => void client.endAsync(true).catch(() => {});
  signal?.addEventListener('abort', end);
  // An abort while mqtt.js was being imported came before the listener.
  if (signal?.aborted) end();
  const timer = setTimeout(end, READ_TIMEOUT_MS).unref();
  const nonce = randomUUID();
  const kept: string[] = [];
  try {
    await connected(client, ONE_OFF_CONNECT_TIMEOUT_MS);
    await new Promise<void>((resolve, reject) => {
      client.on('message', (topic, payload, packet) => {
        const text = payload.toString('utf8');
        if (topic === probe && text === nonce) resolve();
        else if (packet.retain && payload.length > 0 && keep(topic, text)) kept.push(topic);
      });
      client.once('close', () => reject(new Error('MQTT connection closed while reading retained messages')));
      client
        .subscribeAsync(filters, { qos: 0 })
        .then(() => client.publishAsync(probe, nonce, { qos: 0 }))
        .catch(reject);
    });
    return kept;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', end);
    await client.endAsync(true).catch(() => {});
  }
}
