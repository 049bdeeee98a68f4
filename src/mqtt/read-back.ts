import { randomUUID } from 'node:crypto';
import { clientOptions, connectBroker, connected, type MqttSettings, ONE_OFF_CONNECT_TIMEOUT_MS } from './connection.js';

/** A read that has not seen its probe by then is given up (a probe the broker's ACL or its full queue drops). */
const READ_TIMEOUT_MS = 60_000;

/**
 * The topics of the retained messages under `filters` that `keep` picks, read from a short-lived
 * client until `probe` (a topic under `filters`), published after subscribing, comes back: the
 * broker queues the retained messages to us before it, so no wait is guessed. At QoS 0, since a
 * broker cuts a QoS 1 read-back at its queue limit (Mosquitto's max_queued_messages, 1,000 by
 * default); at QoS 0 Mosquitto drops only what finds that many packets still unwritten to our
 * connection, so a reader that keeps up gets every message, and one that falls behind misses some
 * without being told (or misses the probe, and the read times out). `signal` ends the read. The
 * sweep and `mothership mqtt cleanup` both read so.
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
