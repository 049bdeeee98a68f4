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

/** What a sweep read under the service's own topics. */
export interface SweepRead {
  /** Retained messages that `ours` does not recognise (a fake, a ghost of an older release). */
  foreign: string[];
  /** Topics whose retained message `ours` recognises: what the broker holds as the record says. */
  ours: Set<string>;
}

/**
 * The retained messages under the service's own topics (read-back.ts: all of them unless the broker
 * drops some), sorted by `ours`. `signal` ends the read.
 */
export async function readOurTopics(
  settings: MqttSettings,
  clientId: string,
  topics: Topics,
  ours: (topic: string, payload: string) => boolean,
  signal: AbortSignal,
): Promise<SweepRead> {
  const filters = [...topics.discoveryFilters, `${topics.base}/#`];
  const held = new Set<string>();
  const foreign = await readRetainedTopics(
    settings,
    clientId,
    filters,
    `${topics.generation}/sweep`,
    (topic, payload) => {
      if (!sweepable(topics, topic)) return false;
      if (!ours(topic, payload)) return true;
      held.add(topic);
      return false;
    },
    signal,
  );
  return { foreign, ours: held };
}
