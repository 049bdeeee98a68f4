// A person's day as a picture: which room when, yesterday and today, from the event log (SVG).
import { api } from './api.js';
import { node } from './chart.js';
import { el } from './dom.js';
import { zoneName } from './household.js';

const TYPES = ['zone.entry', 'zone.exit', 'presence.changed'];
const DAY_MS = 24 * 60 * 60 * 1000;
/** Room colours (style.css, .seg.c0 ... .c7), given out in the order rooms first appear. */
const COLOURS = 8;

/**
 * Where the person was from each of their events to the next: `{from, to, place}` with place a zone
 * id, 'between' (home, in no room) or 'away'. Before the first event nothing is known (no segment).
 * Pure: events oldest first, times in ms.
 */
export function placesOf(events, endMs) {
  const segments = [];
  let current = null;
  const moveTo = (place, at) => {
    if (current && current.place === place) return;
    if (current) current.to = at;
    current = { from: at, to: endMs, place };
    segments.push(current);
  };
  for (const event of events) {
    const at = Date.parse(event.timestamp);
    if (event.event_type === 'zone.entry') moveTo(event.zone, at);
    else if (event.event_type === 'zone.exit' && !event.detail.ignored && current?.place === event.zone) moveTo('between', at);
    else if (event.event_type === 'presence.changed') moveTo(event.detail.to === 'home' ? (current?.place ?? 'between') : 'away', at);
  }
  return segments.filter((segment) => segment.to > segment.from);
}

/** The part of each segment within [startMs, endMs). */
export function clip(segments, startMs, endMs) {
  return segments
    .filter((segment) => segment.to > startMs && segment.from < endMs)
    .map((segment) => ({ ...segment, from: Math.max(segment.from, startMs), to: Math.min(segment.to, endMs) }));
}

const clock = (ms) => new Date(ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
const placeName = (place) => (place === 'away' ? 'Away' : place === 'between' ? 'Home, no room' : zoneName(place));

/**
 * Draws yesterday and today for `personId` into `container`. Reads the newest 1000 entries, exits
 * and presence changes of the whole household (the log has no index by person): two days of a
 * home, but only hours of a building with ten moves a minute; when the person's day starts before
 * them, the picture says from when it knows.
 */
export async function renderTimeline(container, personId) {
  container.replaceChildren(el('p', { class: 'hint loading-text' }, 'Loading the timeline…'));
  const { events } = await api('GET', `/api/events?order=desc&limit=1000${TYPES.map((type) => `&type=${type}`).join('')}`);
  const now = Date.now();
  const todayStart = new Date(new Date(now).setHours(0, 0, 0, 0)).getTime();
  const days = [
    { label: 'Yesterday', start: todayStart - DAY_MS, end: todayStart },
    { label: 'Today', start: todayStart, end: now },
  ];
  const oldest = events.length ? Date.parse(events.at(-1).timestamp) : now;
  const known = events.length === 1000 ? oldest : -Infinity;
  const mine = events.filter((event) => event.person === personId).reverse();
  const segments = placesOf(mine, now).filter((segment) => segment.to > known);
  drawTimeline(container, days, segments, known);
}

function drawTimeline(container, days, segments, knownFrom) {
  // Drawn at the size it is shown, so its labels stay readable on a phone.
  const width = Math.max(container.clientWidth || 1000, 300);
  const left = 76;
  const rowHeight = 34;
  const top = 8;
  const axis = 22;
  const height = top + days.length * (rowHeight + 10) + axis;
  const x = (ms, day) => left + ((ms - day.start) / DAY_MS) * (width - left - 8);
  const svg = node('svg', { viewBox: `0 0 ${width} ${height}`, class: 'timeline', role: 'img', 'aria-label': 'Which room when, yesterday and today' });
  const colour = new Map();
  const shown = [];
  days.forEach((day, index) => {
    const y = top + index * (rowHeight + 10);
    svg.append(node('text', { x: 0, y: y + rowHeight / 2 + 5, class: 'tick' }, day.label));
    svg.append(node('rect', { x: left, y, width: width - left - 8, height: rowHeight, class: 'day' }));
    for (const segment of clip(segments, day.start, day.end)) {
      if (!colour.has(segment.place))
        colour.set(segment.place, segment.place === 'away' || segment.place === 'between' ? segment.place : `c${colour.size % COLOURS}`);
      const from = x(segment.from, day);
      const rect = node('rect', { x: from, y, width: Math.max(1, x(segment.to, day) - from), height: rowHeight, class: `seg ${colour.get(segment.place)}` });
      rect.append(node('title', {}, `${placeName(segment.place)}: ${clock(segment.from)} – ${clock(segment.to)}`));
      svg.append(rect);
      shown.push(segment);
    }
  });
  const axisY = top + days.length * (rowHeight + 10) + 12;
  for (let hour = 0; hour <= 24; hour += 3)
    svg.append(
      node('text', { x: x(days[0].start + hour * 3600_000, days[0]), y: axisY, class: 'tick', 'text-anchor': 'middle' }, String(hour).padStart(2, '0')),
    );
  const legend = el(
    'ul',
    { class: 'legend' },
    [...colour].map(([place, kind]) => el('li', {}, el('span', { class: `swatch ${kind}` }), placeName(place))),
  );
  const note =
    knownFrom > days[0].start ? el('p', { class: 'hint' }, `The log read goes back to ${new Date(knownFrom).toLocaleString()}; earlier is not drawn.`) : null;
  container.replaceChildren(
    ...[
      svg,
      shown.length ? legend : el('p', { class: 'hint' }, 'No room recorded yesterday or today: the timeline fills as entries and exits arrive.'),
      note,
    ].filter(Boolean),
  );
}
