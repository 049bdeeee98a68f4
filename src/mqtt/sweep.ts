import type { MqttSettings } from './connection.js';
import { readRetainedTopics } from './read-back.js';
import type { Topics } from './topics.js';

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
 * fake, a ghost of an older release), read completely (read-back.ts). `signal` ends the read.
 */
export function readForeign(
  settings: MqttSettings,
  clientId: string,
  topics: Topics,
  ours: (topic: string, payload: string) => boolean,
  signal: AbortSignal,
): Promise<string[]> {
  const filters = [...topics.discoveryFilters, `${topics.base}/#`];
  return readRetainedTopics(
    settings,
    clientId,
    filters,
    `${topics.generation}/sweep`,
    (topic, payload) => sweepable(topics, topic) && !ours(topic, payload),
    signal,
  );
}
