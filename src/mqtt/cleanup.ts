import { DomainError } from '../errors.js';
import { clientOptions, connectBroker, connected, describeMqttError, type MqttSettings, ONE_OFF_CONNECT_TIMEOUT_MS } from './connection.js';
import { readRetainedTopics } from './read-back.js';
import { Topics } from './topics.js';

/** Why `installation` cannot be cleaned up from the installation `ownId`; null when it can. */
export function cleanupRefusal(installation: string, ownId: string): string | null {
  return installation === ownId ? `"${installation}" is this installation's own id: its entities are live, not left over` : null;
}

/** A discovery config Mothership published for `installation`: its device identifier says so. */
function isOurDiscoveryConfig(payload: string, installation: string): boolean {
  try {
    const config = JSON.parse(payload) as { device?: { identifiers?: unknown } };
    return Array.isArray(config.device?.identifiers) && config.device.identifiers.includes(`mothership_${installation}`);
  } catch {
    return false;
  }
}

/**
 * Clears, on the broker of `settings`, every retained discovery config (both forms) and state topic
 * that the installation `installation` left (a discovery config only when its device is that
 * installation's, so another integration's device of the same node id stays): a lost DATA_DIR gives a new id, and Home Assistant would
 * keep the old device forever. Its own short-lived client, so the service's connection and its ghost
 * handling see none of it. Throws when the broker cannot be reached.
 */
export async function clearInstallation(settings: MqttSettings, clientId: string, installation: string): Promise<{ cleared: number; filters: string[] }> {
  const topics = new Topics(settings.topic_root, installation, settings.discovery_prefix);
  const filters = [...topics.discoveryFilters, `${topics.base}/#`];
  // Under its topic root everything is the installation's; under the discovery prefix only what it
  // wrote: an installation id can equal another integration's node id (an ESPHome device's name).
  const retained = await readRetainedTopics(
    settings,
    clientId,
    filters,
    `${topics.generation}/cleanup`,
    (topic, payload) => topic.startsWith(`${topics.base}/`) || isOurDiscoveryConfig(payload, installation),
  );
  const client = await connectBroker(clientOptions(settings, clientId));
  try {
    await connected(client, ONE_OFF_CONNECT_TIMEOUT_MS);
    await Promise.all(retained.map((topic) => client.publishAsync(topic, '', { qos: 1, retain: true })));
    return { cleared: retained.length, filters };
  } finally {
    await client.endAsync().catch(() => {});
  }
}

/** The broker of a short-lived connection could not be reached (502, with the reason). */
export function unreachable(error: unknown): DomainError {
  return new DomainError('bad_gateway', `Could not reach the broker: ${describeMqttError(error as Error & { code?: string | number })}`);
}
