import type { PersonView, ZoneView } from '../presence/index.js';
import type { Topics } from './topics.js';

/** A retained state message: topic and payload (pure; shared by the full sync and incremental updates). */
export type StateMessage = [topic: string, payload: string];

/**
 * A person's retained state. The device tracker says only `home` or `not_home`: Home Assistant's
 * `person` lets a non-GPS tracker win over a phone's GPS only while its state is exactly `home`, and
 * reads any other state (a room name) like `not_home`. The room goes in the attributes (`room`, the
 * zone's name), which the tracker and the person's room sensor read.
 */
export function personState(topics: Topics, person: PersonView, zoneName: string | null): StateMessage[] {
  const room = person.zone ? (zoneName ?? person.zone) : null;
  const attributes: StateMessage = [topics.personAttributes(person.id), JSON.stringify({ zone: person.zone, room, last_seen: person.last_seen })];
  // A person not seen yet has no presence: nothing retained, so Home Assistant shows `unknown` (as
  // the API does) and its `person` skips the tracker, where `not_home` would have been a guess.
  if (person.last_seen === null) return [attributes];
  return [[topics.personPresence(person.id), person.presence], attributes, [topics.personTracker(person.id), person.presence]];
}

/** Every state topic of a person, published or not (what clearing the person removes). */
export function personStateTopics(topics: Topics, id: string): string[] {
  return [topics.personPresence(id), topics.personAttributes(id), topics.personTracker(id)];
}

export function zoneState(topics: Topics, zone: ZoneView): StateMessage {
  return [topics.zoneOccupancy(zone.id), JSON.stringify({ count: zone.count, occupied: zone.occupied, occupants: zone.occupants })];
}
