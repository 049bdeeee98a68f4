import type { PersonView, ZoneView } from '../presence/service.js';
import type { Topics } from './topics.js';

/** A retained state message: topic and payload (pure; shared by the full sync and incremental updates). */
export type StateMessage = [topic: string, payload: string];

/**
 * A person's retained state. The device tracker's state is the name of the zone the person is in
 * (Home Assistant then shows the room on the person), else `home` or `not_home`.
 */
export function personState(topics: Topics, person: PersonView, zoneName: string | null): StateMessage[] {
  return [
    [topics.personPresence(person.id), person.presence],
    [topics.personAttributes(person.id), JSON.stringify({ zone: person.zone, last_seen: person.last_seen })],
    [topics.personTracker(person.id), person.zone ? (zoneName ?? person.zone) : person.presence],
  ];
}

export function zoneState(topics: Topics, zone: ZoneView): StateMessage {
  return [topics.zoneOccupancy(zone.id), JSON.stringify({ count: zone.count, occupied: zone.occupied, occupants: zone.occupants })];
}
