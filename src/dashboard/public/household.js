// Persons, zones and system health as the page knows them: loaded once, then kept current by the
// events themselves (each carries what it changed), so the event stream costs no API request.
import { api, apiAll } from './api.js';

export const household = { persons: new Map(), zones: new Map(), health: null, loaded: false };

/** How many persons have each name: built when asked, dropped when a person is added, renamed or deleted. */
let nameCounts = null;

/** A name as the service compares names (`nameKey`, src/presence/transitions.ts, which a test holds it to): "Bob" and " bob " are one. */
const nameKey = (name) =>
  name
    .normalize('NFKC')
    .replace(/\p{Default_Ignorable_Code_Point}/gu, '')
    .trim()
    .replace(/\s+/g, ' ')
    .toLowerCase();

/** Whether another person has this person's name: the lists then show the id too, to tell them apart. */
export function sharesName(person) {
  if (!nameCounts) {
    nameCounts = new Map();
    for (const { name } of household.persons.values()) {
      const key = nameKey(name);
      nameCounts.set(key, (nameCounts.get(key) ?? 0) + 1);
    }
  }
  return nameCounts.get(nameKey(person.name)) > 1;
}

export async function loadHousehold() {
  // Every page of the lists (1000 a page): the names in events and the People page's search need them all.
  const [persons, zones, health] = await Promise.all([apiAll('/api/persons'), apiAll('/api/zones'), api('GET', '/api/system/health')]);
  household.persons = new Map(persons.map((person) => [person.id, person]));
  nameCounts = null;
  household.zones = new Map(zones.map((zone) => [zone.id, zone]));
  household.health = health;
  household.loaded = true;
}

/** The names of persons and zones deleted since, from their deletion events: the events before it still read them. */
const deletedNames = { persons: new Map(), zones: new Map() };

/** Remembers the name a deletion event carries (live, or in a page of the log). */
export function rememberDeleted({ event_type: type, person, zone, detail }) {
  if (type === 'person.deleted') deletedNames.persons.set(person, detail.name);
  if (type === 'zone.deleted') deletedNames.zones.set(zone, detail.name);
}

/** A person's or zone's name, also once deleted; the id when it is unknown (not loaded yet, or deleted before the events read). */
export const personName = (id) => household.persons.get(id)?.name ?? deletedNames.persons.get(id) ?? id;
export const zoneName = (id) => household.zones.get(id)?.name ?? deletedNames.zones.get(id) ?? id;

/**
 * Moves a person into (`inside`) or out of a zone's list. Events carry the zone's count but not its
 * list (it grows with the zone), so the page keeps the list from the people's own entries and exits.
 */
function setOccupancy(zoneId, personId, inside, count) {
  const zone = household.zones.get(zoneId);
  if (!zone) return;
  const others = zone.occupants.filter((id) => id !== personId);
  zone.occupants = inside ? [...others, personId].sort() : others;
  zone.count = typeof count === 'number' ? count : zone.occupants.length;
  zone.occupied = zone.count > 0;
}

/** Applies one event; returns whether it changed anything the page shows about the household. */
export function applyToHousehold(event) {
  const { event_type: type, person: personId, zone: zoneId, detail, timestamp } = event;
  const person = personId ? household.persons.get(personId) : undefined;
  switch (type) {
    case 'zone.entry':
    case 'zone.exit':
      // An ignored exit changed nobody's place; its count is the zone's unchanged one.
      if (!detail.ignored) setOccupancy(zoneId, personId, type === 'zone.entry', detail.count);
      // An ignored exit changes nothing about the person, not even when they were last seen.
      if (!person || detail.ignored) return true;
      person.last_seen = timestamp;
      if (type === 'zone.entry') Object.assign(person, { zone: zoneId, presence: 'home' });
      else if (person.zone === zoneId) person.zone = null;
      return true;
    case 'presence.changed':
      if (person) Object.assign(person, { presence: detail.to, ...(detail.to === 'not_home' ? { zone: null } : {}) });
      return true;
    case 'person.created':
      nameCounts = null;
      household.persons.set(personId, { id: personId, name: detail.name, presence: 'unknown', zone: null, last_seen: null });
      return true;
    case 'person.updated':
      nameCounts = null;
      if (person) person.name = detail.name;
      return true;
    case 'person.deleted': {
      nameCounts = null;
      rememberDeleted(event);
      household.persons.delete(personId);
      // The deletion carries no occupancy: the person simply leaves the zone's list.
      if (zoneId) setOccupancy(zoneId, personId, false);
      return true;
    }
    case 'zone.created':
      household.zones.set(zoneId, { id: zoneId, name: detail.name, count: 0, occupied: false, occupants: [] });
      return true;
    case 'zone.updated':
      if (household.zones.has(zoneId)) household.zones.get(zoneId).name = detail.name;
      return true;
    case 'zone.deleted':
      rememberDeleted(event);
      household.zones.delete(zoneId);
      return true;
    case 'system.health':
      household.health = { ...detail };
      return true;
    case 'system.mode_changed':
      if (household.health) household.health.mode = detail.to;
      return true;
    // Nothing the household model holds: the fall banner, the nodes page and the activity list read these.
    case 'fall.detected':
    case 'fall.cleared':
    case 'anomaly.detected':
    case 'node.online':
    case 'node.offline':
    case 'enrichment.requested':
    case 'enrichment.completed':
    case 'enrichment.failed':
    case 'baseline.recorded':
    case 'webhook.test':
      return false;
  }
  // A type this dashboard does not know (a newer server): nothing to apply.
  return false;
}
