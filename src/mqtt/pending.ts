import { unhandled, type EventPayload } from '../events/index.js';
import { personConfigs, removal, zoneConfigs, type DiscoveryContext, type DiscoveryMessage } from './discovery.js';
import { personStateTopics } from './state.js';

/** What changed since the last flush. Bounded by the number of entities, however fast events come. */
export interface Pending {
  /** Everything: availability, every discovery config and every state (a connect, Home Assistant's birth). */
  all: boolean;
  /** With `all`: send every discovery config even where the broker holds it already (Home Assistant's birth, Publish Discovery). */
  forceConfigs: boolean;
  persons: Set<string>;
  zones: Set<string>;
  configs: { persons: Set<string>; zones: Set<string> };
  removed: DiscoveryMessage[];
  clearTopics: Set<string>;
  fall: boolean;
  mode: boolean;
  health: boolean;
}

export const emptyPending = (): Pending => ({
  all: false,
  forceConfigs: false,
  persons: new Set(),
  zones: new Set(),
  configs: { persons: new Set(), zones: new Set() },
  removed: [],
  clearTopics: new Set(),
  fall: false,
  mode: false,
  health: false,
});

export const hasWork = (pending: Pending) =>
  pending.all ||
  pending.persons.size > 0 ||
  pending.zones.size > 0 ||
  pending.removed.length > 0 ||
  pending.clearTopics.size > 0 ||
  pending.fall ||
  pending.mode ||
  pending.health;

/**
 * Notes in `pending` what an event changes on the broker (the flush reads the new values from the
 * database); false when it changes no retained state.
 */
export function recordChange(pending: Pending, event: EventPayload, context: DiscoveryContext): boolean {
  const { person, zone } = event;
  const { topics } = context;
  switch (event.event_type) {
    case 'zone.entry':
    case 'zone.exit':
    case 'presence.changed':
      // An ignored exit (the person was not in that zone) changed no state: nothing to republish.
      if (event.event_type === 'zone.exit' && event.detail.ignored) return false;
      if (person) pending.persons.add(person);
      if (zone) pending.zones.add(zone);
      return true;
    case 'person.created':
    case 'person.updated':
      if (!person) return false;
      pending.configs.persons.add(person);
      pending.persons.add(person);
      return true;
    case 'person.deleted':
      if (!person) return false;
      pending.removed.push(...removal(personConfigs(context, { id: person, name: '' })));
      for (const topic of personStateTopics(topics, person)) pending.clearTopics.add(topic);
      if (zone) pending.zones.add(zone);
      return true;
    case 'zone.created':
    case 'zone.updated':
      if (!zone) return false;
      pending.configs.zones.add(zone);
      pending.zones.add(zone);
      return true;
    case 'zone.deleted':
      if (!zone) return false;
      pending.removed.push(...removal(zoneConfigs(context, { id: zone, name: '' })));
      // Its occupants each had a zone.exit before it, which republishes them.
      pending.clearTopics.add(topics.zoneOccupancy(zone));
      return true;
    case 'fall.detected':
    case 'fall.cleared':
      pending.fall = true;
      return true;
    case 'system.mode_changed':
      pending.mode = true;
      return true;
    case 'system.health':
      pending.health = true;
      return true;
    // No retained state: anomalies are published as they come (not retained), node changes reach the
    // broker with the health report they cause, the rest is not mirrored.
    case 'anomaly.detected':
    case 'node.online':
    case 'node.offline':
    case 'enrichment.requested':
    case 'enrichment.completed':
    case 'enrichment.failed':
    case 'baseline.recorded':
    case 'webhook.test':
      return false;
    default:
      return unhandled(event);
  }
}
