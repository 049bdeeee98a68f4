/**
 * Presence rules as plain functions: a person is in at most one zone; entering
 * a zone leaves the previous one and makes the person `home`; a person in no zone becomes `not_home`
 * once `awayDelayMs` has passed since they left.
 */
import type { EventDetails, ZoneOccupancy } from '../events/index.js';

export type Presence = 'home' | 'not_home';

export interface PersonState {
  presence: Presence;
  zone_id: string | null;
  left_at: string | null;
  last_seen: string | null;
}

type TransitionType = 'zone.entry' | 'zone.exit' | 'presence.changed';
/** An event a transition causes: its detail without the occupancy, which the writer adds from the database. */
export type TransitionEvent = {
  [K in TransitionType]: { type: K; zone: K extends 'presence.changed' ? string | null : string; detail: Omit<EventDetails[K], keyof ZoneOccupancy> };
}[TransitionType];

export interface Transition {
  next: PersonState;
  /** Events in the order they happened, with the zone each concerns. */
  events: TransitionEvent[];
}

export function enterZone(person: PersonState, zone: string, at: string): Transition {
  const events: Transition['events'] = [];
  if (person.zone_id && person.zone_id !== zone) {
    events.push({ type: 'zone.exit', zone: person.zone_id, detail: { reason: 'entered_other_zone', to_zone: zone } });
  }
  events.push({ type: 'zone.entry', zone, detail: { from_zone: person.zone_id !== zone ? person.zone_id : null, already_inside: person.zone_id === zone } });
  if (person.presence !== 'home') {
    // From what the API reported: a first sighting is no homecoming (a flow on `from: not_home` must not fire for it).
    events.push({ type: 'presence.changed', zone, detail: { from: reportedPresence(person), to: 'home' } });
  }
  return { next: { presence: 'home', zone_id: zone, left_at: null, last_seen: at }, events };
}

export function exitZone(person: PersonState, zone: string, at: string, awayDelayMs: number): Transition {
  if (person.zone_id !== zone) {
    // A late or duplicate exit from a zone the person is not in: recorded, but it changes nothing (not
    // even last_seen, which Home Assistant shows: a stale sighting must not republish the person).
    return { next: person, events: [{ type: 'zone.exit', zone, detail: { ignored: true, reason: 'not_in_zone' } }] };
  }
  const left: PersonState = { presence: person.presence, zone_id: null, left_at: at, last_seen: at };
  const events: Transition['events'] = [{ type: 'zone.exit', zone, detail: {} }];
  if (awayDelayMs === 0) return markAway(left, events);
  return { next: left, events };
}

/** How many persons other than the one moving are in each zone its move concerns, as read before it. */
export type OthersInZones = ReadonlyMap<string, number>;

/** A zone's occupant count once the move is written: the others in it, and the person if the move left them there. */
export const occupancyAfter = (others: OthersInZones, next: PersonState, zone: string): number => (others.get(zone) ?? 0) + (next.zone_id === zone ? 1 : 0);

/** True when a person who left every zone has been away long enough to become `not_home`. */
export function isAwayDue(person: PersonState, nowMs: number, awayDelayMs: number): boolean {
  return person.presence === 'home' && person.zone_id === null && person.left_at !== null && Date.parse(person.left_at) + awayDelayMs <= nowMs;
}

export function markAway(person: PersonState, events: Transition['events'] = []): Transition {
  if (person.presence === 'not_home') return { next: person, events };
  return {
    next: { ...person, presence: 'not_home', left_at: null },
    events: [...events, { type: 'presence.changed', zone: null, detail: { from: 'home', to: 'not_home' } }],
  };
}

/**
 * Presence as the API reports it: `unknown` until the person's first entry or exit (the only events
 * that set `last_seen`), rather than the `not_home` a new person is stored with.
 */
export function reportedPresence(person: Pick<PersonState, 'presence' | 'last_seen'>): Presence | 'unknown' {
  return person.last_seen === null ? 'unknown' : person.presence;
}

/**
 * The form in which names compare: two names are the same name when they differ only in case,
 * compatibility forms, white space or characters that show nothing (what the name pattern, NOT_BLANK,
 * calls invisible: a zero-width space, a soft hyphen, a bidi mark, a byte order mark, a control).
 * Inside an emoji sequence a joiner between two pictures and the tags of a flag make another
 * picture (a family, England's flag), so there those are kept. Normalised again once the rest are
 * gone: `e`, a zero-width space and U+0301 are "é". `name_key` stores it, so a create finds a taken
 * name over an index. The dashboard runs this function's own source (dashboard/index.ts): it uses
 * nothing from outside itself.
 */
export const nameKey = (name: string) =>
  name
    .normalize('NFKC')
    // White space but the byte order mark, which JavaScript's \s counts and which shows nothing.
    .replace(/[^\S\ufeff]+/g, ' ')
    .replace(/[\p{Cc}\p{Default_Ignorable_Code_Point}\u2800\ufff9-\ufffb]+/gu, (invisible: string, at: number, whole: string) => {
      if (!/[\p{Extended_Pictographic}\p{Emoji_Modifier}]$/u.test(whole.slice(Math.max(0, at - 2), at))) return '';
      const joinsAnother = /^\p{Extended_Pictographic}/u.test(whole.slice(at + invisible.length));
      const flag = invisible.includes('\u{e007f}');
      return [...invisible].filter((character) => (character === '\u200d' && joinsAnother) || (flag && /^[\u{e0020}-\u{e007f}]$/u.test(character))).join('');
    })
    .normalize('NFKC')
    .trim()
    .replace(/\s+/g, ' ')
    .toLowerCase();

/** The most a sweep's interval grows to: a transition it finds is at most this late. */
export const SWEEP_MAX_INTERVAL_MS = 1000;

/** How often the away sweep looks for persons due to become `not_home`: a quarter of the delay. */
export const awaySweepIntervalMs = (awayDelayMs: number) => Math.max(50, Math.min(SWEEP_MAX_INTERVAL_MS, Math.floor(awayDelayMs / 4) || 50));

/**
 * How often the node sweep looks for silent nodes: `node.offline` comes at most a tenth of the
 * timeout late. Both sweeps run on the ticks the other sweeps share (1 s at most), so an idle service
 * wakes for none of its own.
 */
export const nodeSweepIntervalMs = (nodeTimeoutMs: number) => Math.max(50, Math.min(SWEEP_MAX_INTERVAL_MS, Math.floor(nodeTimeoutMs / 10)));
