// The recent events and the fall history, in words and with names (not ids): loaded once, then
// each event from the stream is prepended.
import { api } from './api.js';
import { dateTime, el, emptyState, time } from './dom.js';
import { personName, zoneName } from './household.js';

const person = (id) => (id ? el('a', { href: `#/people/${encodeURIComponent(id)}` }, personName(id)) : 'Someone');
const zone = (id) => (id ? el('a', { href: `#/zones/${encodeURIComponent(id)}` }, zoneName(id)) : 'a zone');
const node = (id) => el('a', { href: `#/nodes/${encodeURIComponent(id)}` }, id);
const match = (id) => el('a', { href: `#/enrichment/matches/${encodeURIComponent(id)}` }, id);
/** A link to the record, with the name the event carries. */
const named = (link, id, name) => {
  const anchor = link(id);
  anchor.textContent = name;
  return anchor;
};
const where = (event) => (event.zone ? [' in ', zone(event.zone)] : []);

/** One event as a sentence; its parts are text or links to the records it names. */
export function describe(event) {
  const { detail } = event;
  switch (event.event_type) {
    case 'zone.entry':
      return [person(event.person), detail.already_inside ? ' is still in ' : ' entered ', zone(event.zone)];
    case 'zone.exit':
      return detail.ignored ? [person(event.person), ' left ', zone(event.zone), ' (not there: ignored)'] : [person(event.person), ' left ', zone(event.zone)];
    case 'presence.changed':
      return [person(event.person), detail.to === 'home' ? ' came home' : ' is away'];
    case 'fall.detected':
      return ['Fall: ', person(event.person), ...where(event)];
    case 'fall.cleared':
      return ['Fall cleared: ', person(event.person), ...where(event)];
    case 'anomaly.detected':
      return ['Anomaly', ...where(event), event.person ? [' (', person(event.person), ')'] : [], summarize(detail) ? `: ${summarize(detail)}` : ''];
    case 'system.health':
      return [
        `${detail.node_count} node${detail.node_count === 1 ? '' : 's'} online`,
        detail.quality === null ? '' : `, quality ${detail.quality}%`,
        `, mode ${detail.mode}`,
      ];
    case 'node.online':
      return ['Node ', node(detail.node), ` online (quality ${detail.quality}%)`];
    case 'node.offline':
      return ['Node ', node(detail.node), ` offline (last heartbeat ${time(detail.last_seen)})`];
    case 'system.mode_changed':
      return [`Mode ${detail.from} → ${detail.to}`, detail.source === 'mqtt' ? ' (from Home Assistant)' : ''];
    // These carry the name: right even after a later rename or deletion.
    case 'person.created':
      return [named(person, event.person, detail.name), ' added'];
    case 'person.updated':
      return ['Person renamed to ', named(person, event.person, detail.name)];
    case 'person.deleted':
      return [detail.name, ' deleted'];
    case 'zone.created':
      return [named(zone, event.zone, detail.name), ' added'];
    case 'zone.updated':
      return ['Zone renamed to ', named(zone, event.zone, detail.name)];
    case 'zone.deleted':
      return [detail.name, ' deleted', detail.count ? `; ${detail.count} ${detail.count === 1 ? 'person' : 'people'} moved out` : ''];
    case 'enrichment.requested':
      return ['Commentary requested for ', match(detail.match_id), ` by ${detail.bot_id}`];
    case 'enrichment.completed':
      return ['Commentary ready for ', match(detail.match_id)];
    case 'enrichment.failed':
      return ['Commentary failed for ', match(detail.match_id), `: ${detail.error}`];
    case 'baseline.recorded':
      return [`Baseline ${detail.commit_sha.slice(0, 7)} `, detail.regressed ? `regressed: ${detail.regressions.join(', ')}` : 'within its history'];
    default:
      return [summarize(detail)];
  }
}

function summarize(detail) {
  const text = Object.entries(detail ?? {})
    .slice(0, 3)
    .map(([key, value]) => `${key}: ${typeof value === 'object' ? JSON.stringify(value) : value}`)
    .join(', ');
  return text.length > 90 ? text.slice(0, 89) + '…' : text;
}

/**
 * The overview's event filter: what a household looks at first (where people are, and safety), and
 * the rest by who causes it. The key is kept in the address (`?events=`).
 */
export const EVENT_FILTERS = {
  household: {
    label: 'Presence and safety',
    types: ['zone.entry', 'zone.exit', 'presence.changed', 'fall.detected', 'fall.cleared', 'anomaly.detected'],
  },
  changes: {
    label: 'People and zones added or changed',
    types: ['person.created', 'person.updated', 'person.deleted', 'zone.created', 'zone.updated', 'zone.deleted', 'system.mode_changed'],
  },
  system: { label: 'Nodes and system health', types: ['system.health', 'node.online', 'node.offline'] },
  automation: {
    label: 'CI and bots',
    types: ['baseline.recorded', 'enrichment.requested', 'enrichment.completed', 'enrichment.failed', 'webhook.test'],
  },
  all: { label: 'Everything', types: null },
};

const MAX_EVENTS = 100;
/** The newest events first, as received; the record pages read it. */
export const recent = [];
/** The newest events of each filter that was shown, loaded from the log when first chosen, then kept by the stream. */
const filtered = new Map();
const fallHistory = [];
let loaded = false;

const typeQuery = (types) => (types ?? []).map((type) => `&type=${encodeURIComponent(type)}`).join('');

export async function loadActivity(filter = 'household') {
  const [history, falls, matching] = await Promise.all([
    loaded ? null : api('GET', '/api/events?order=desc&limit=30'),
    loaded ? null : api('GET', '/api/events?type=fall.detected&type=fall.cleared&order=desc&limit=10'),
    filtered.has(filter) ? null : api('GET', `/api/events?order=desc&limit=30${typeQuery(EVENT_FILTERS[filter].types)}`),
  ]);
  // Events the stream delivered while the history loaded are already in the lists.
  if (history) merge(recent, history.events);
  if (falls) merge(fallHistory, falls.events);
  if (matching) merge(filtered.get(filter) ?? filtered.set(filter, []).get(filter), matching.events);
  loaded = true;
}

function merge(list, events) {
  for (const event of events) if (!list.some((known) => known.seq === event.seq)) list.push(event);
  list.sort((a, b) => b.seq - a.seq);
}

const keeps = (filter, event) => !EVENT_FILTERS[filter].types || EVENT_FILTERS[filter].types.includes(event.event_type);

function prepend(list, event, max) {
  if (list.some((known) => known.seq === event.seq)) return;
  list.unshift(event);
  list.length = Math.min(list.length, max);
}

export function applyToActivity(event) {
  prepend(recent, event, MAX_EVENTS);
  for (const [filter, list] of filtered) if (keeps(filter, event)) prepend(list, event, MAX_EVENTS);
  if (event.event_type.startsWith('fall.')) prepend(fallHistory, event, 10);
}

function eventItem(event, when = time) {
  return el(
    'li',
    { 'data-seq': event.seq, class: event.severity },
    el('time', { datetime: event.timestamp, title: dateTime(event.timestamp) }, when(event.timestamp)),
    el('span', { class: 'what' }, describe(event)),
    el('span', { class: 'type' }, event.event_type),
  );
}

/** Renders the recent events `concerns` keeps into `list` (a record page: its person's or zone's). */
export function renderEvents(list, concerns, empty) {
  if (!loaded) return;
  const events = recent.filter(concerns);
  list.replaceChildren(...(events.length ? events.map((event) => eventItem(event)) : [emptyState('li', empty)]));
}

/** Renders the newest events of one of EVENT_FILTERS into `list`. */
export function renderFiltered(list, filter) {
  const events = filtered.get(filter);
  if (!events) return;
  const empty =
    filter === 'household'
      ? 'No presence or safety events yet. Entries, exits, presence changes and falls appear here as they happen; other events are under the filter.'
      : 'No events of this kind yet.';
  list.replaceChildren(...(events.length ? events.map((event) => eventItem(event)) : [emptyState('li', empty)]));
}

export function renderFalls(list) {
  if (!loaded) return;
  list.replaceChildren(
    ...(fallHistory.length
      ? fallHistory.map((event) => eventItem(event, dateTime))
      : [emptyState('li', 'No falls recorded. A fall reported by a sensing node shows here and as a red banner on every page.')]),
  );
}
