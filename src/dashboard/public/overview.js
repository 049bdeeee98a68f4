// Overview: system, zones, people, falls and recent events; #/people/<id> and #/zones/<id> open a record.
import { api, ApiError, loadView, report } from './api.js';
import { $, ago, busy, clearErrors, dateTime, el, emptyState, showErrors } from './dom.js';
import { household, loadHousehold, personName, sharesName, zoneName } from './household.js';
import { EVENT_FILTERS, loadActivity, loadRecordEvents, renderEvents, renderFalls, renderFiltered } from './activity.js';
import { renderTimeline } from './timeline.js';

/** How many people the overview lists (those at home first); the People page lists and searches them all. */
const OVERVIEW_PEOPLE = 12;

/** The object id part of an entity id, as the server builds it (src/mqtt/discovery.ts, defaultEntityId). */
const entitySlug = (id) =>
  id
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '');

const COLLECTIONS = {
  zones: {
    map: () => household.zones,
    loses: (zone) =>
      `Home Assistant loses sensor.mothership_${entitySlug(zone.id)}_occupancy_count and binary_sensor.mothership_${entitySlug(zone.id)}_occupied${zone.count ? `. ${zone.count === 1 ? 'Its occupant leaves' : `Its ${zone.count} occupants leave`} the room, as if a sensor saw them go: unless seen in another room, they turn away after the away delay, in Home Assistant too` : ''}.`,
  },
  persons: {
    map: () => household.persons,
    loses: (person) =>
      `Home Assistant loses device_tracker.mothership_${entitySlug(person.id)}, binary_sensor.mothership_${entitySlug(person.id)}_presence and sensor.mothership_${entitySlug(person.id)}_room; a Home Assistant person that tracks them loses that source.`,
  },
};

let record = null; // { kind: 'people' | 'zones', id } from the route

export const overview = {
  id: 'overview',
  async show(params = []) {
    record = params.length === 2 && ['people', 'zones'].includes(params[0]) ? { kind: params[0], id: params[1] } : null;
    render(); // what is already known, at once
    await Promise.all([household.loaded ? null : loadHousehold(), loadActivity(eventFilter()), record ? loadRecordEvents().catch(report) : null]);
    render();
    if (record?.kind === 'people' && household.persons.has(record.id)) await renderTimeline($('#timeline'), record.id);
  },
  /** The household and the activity were updated by the app; this only redraws. */
  apply() {
    render();
  },
};

function render() {
  if (household.loaded) {
    renderSystem();
    renderZones();
    renderPersons();
  }
  renderFalls($('#falls'));
  $('#event-filter').value = eventFilter();
  renderFiltered($('#events'), eventFilter());
  renderRecord();
}

// ---- the events filter, kept in the address's query string (?events=system#/overview) ----

for (const [key, { label }] of Object.entries(EVENT_FILTERS)) $('#event-filter').append(el('option', { value: key }, label));

function eventFilter() {
  const key = new URLSearchParams(location.search).get('events');
  return key && EVENT_FILTERS[key] ? key : 'household';
}

$('#event-filter').addEventListener('change', async (event) => {
  const url = new URL(location.href);
  if (event.target.value === 'household') url.searchParams.delete('events');
  else url.searchParams.set('events', event.target.value);
  history.replaceState(history.state, '', url);
  await loadView('overview', () => loadActivity(eventFilter()));
  render();
});

function renderSystem() {
  const { health } = household;
  $('#node-count').replaceChildren(el('a', { href: '#/nodes' }, health.node_count));
  $('#quality').textContent = health.quality === null ? '-' : `${health.quality}%`;
  if (document.activeElement !== $('#mode')) $('#mode').value = health.mode;
}

const collator = new Intl.Collator(undefined, { numeric: true });
const byName = (a, b) => collator.compare(a.name, b.name);

function actions(collection, item) {
  return el(
    'span',
    { class: 'row-actions' },
    el('button', { type: 'button', class: 'link', onclick: () => rename(collection, item), 'aria-label': `Rename ${item.name}` }, 'Rename'),
    el('button', { type: 'button', class: 'link danger', onclick: () => remove(collection, item), 'aria-label': `Delete ${item.name}` }, 'Delete'),
  );
}

function renderZones() {
  const zones = [...household.zones.values()].sort(byName);
  $('#zones').replaceChildren(
    ...zones.map((zone) =>
      el(
        'div',
        { class: `zone${zone.occupied ? ' occupied' : ''}`, 'data-zone': zone.id },
        el('a', { class: 'name', href: `#/zones/${encodeURIComponent(zone.id)}` }, zone.name),
        el('div', { class: 'count' }, zone.count),
        el('div', { class: 'who' }, zone.occupants.map(personName).join(', ')),
        actions('zones', zone),
      ),
    ),
  );
  if (!zones.length)
    $('#zones').append(emptyState('p', 'No zones yet. Add the rooms your sensing nodes cover; each becomes an occupancy sensor in Home Assistant.'));
}

export function presenceBadge(person) {
  if (person.presence === 'unknown')
    return el('span', { class: 'badge unknown', title: 'No entry or exit seen yet: the first one from a sensing node tells' }, 'unknown');
  if (person.presence !== 'home') return el('span', { class: 'badge' }, 'away');
  // At home in a room: the room's name says both, and leaves a phone's row room for it.
  if (person.zone) return el('span', { class: 'badge ok', title: `Home, in ${zoneName(person.zone)}` }, zoneName(person.zone));
  return el('span', { class: 'badge ok' }, 'home');
}

/** Under a person's name: their id when another person has the same name, and when they were last seen. */
function seenLine(person) {
  const parts = [sharesName(person) ? person.id : null, person.last_seen ? `seen ${ago(person.last_seen)}` : null].filter(Boolean);
  return parts.length ? el('small', { class: 'hint seen' }, parts.join(' · ')) : null;
}

/** A person's line: name, when last seen, presence; `withActions` adds Rename and Delete. */
export function personItem(person, withActions = true) {
  return el(
    'li',
    { 'data-person': person.id },
    el('span', { class: 'who' }, el('a', { href: `#/people/${encodeURIComponent(person.id)}` }, person.name), seenLine(person)),
    el('span', { class: 'row-actions' }, presenceBadge(person), withActions ? actions('persons', person) : null),
  );
}

const RANK = { home: 0, not_home: 1, unknown: 2 };

function renderPersons() {
  const persons = [...household.persons.values()].sort((a, b) => RANK[a.presence] - RANK[b.presence] || byName(a, b));
  $('#persons').replaceChildren(...persons.slice(0, OVERVIEW_PEOPLE).map((person) => personItem(person)));
  if (persons.length > OVERVIEW_PEOPLE)
    $('#persons').append(el('li', { class: 'more' }, el('a', { href: '#/people' }, `All ${persons.length.toLocaleString()} people: search and list →`)));
  if (!persons.length)
    $('#persons').append(emptyState('li', 'No people yet. Add the people who live here; each gets a presence sensor and a device tracker in Home Assistant.'));
}

function renderRecord() {
  const card = $('#record');
  card.hidden = !record;
  if (!record) return;
  const close = el('a', { href: '#/overview', class: 'close', 'aria-label': 'Close' }, '×');
  if (!household.loaded) return card.replaceChildren(el('p', { class: 'hint loading-text' }, 'Loading…'));
  const collection = record.kind === 'people' ? 'persons' : 'zones';
  const item = COLLECTIONS[collection].map().get(record.id);
  if (!item)
    return card.replaceChildren(
      el('h2', {}, record.id, close),
      el('p', { class: 'hint' }, `There is no ${record.kind === 'people' ? 'person' : 'zone'} "${record.id}" (any more).`),
    );
  const facts =
    collection === 'persons'
      ? [
          ['Presence', presenceBadge(item)],
          ['Zone', item.zone ? el('a', { href: `#/zones/${encodeURIComponent(item.zone)}` }, zoneName(item.zone)) : '-'],
          ['Last seen', item.last_seen ? `${dateTime(item.last_seen)} (${ago(item.last_seen)})` : 'not yet'],
          ['Id', item.id],
        ]
      : [
          ['Occupants', item.count],
          [
            'Who',
            item.occupants.length
              ? item.occupants.flatMap((id, index) => [index ? ', ' : '', el('a', { href: `#/people/${encodeURIComponent(id)}` }, personName(id))])
              : 'nobody',
          ],
          ['Id', item.id],
        ];
  const list = el('ol', { class: 'events' });
  // The timeline is drawn by show() once the log is read; a redraw of the card keeps the picture.
  const timeline = collection === 'persons' ? ($('#timeline', card) ?? el('div', { id: 'timeline', class: 'timeline-box' })) : null;
  card.replaceChildren(
    el('h2', {}, item.name, el('span', { class: 'row-actions' }, actions(collection, item), close)),
    el('dl', { class: 'facts' }, ...facts.map(([term, value]) => el('div', {}, el('dt', {}, term), el('dd', {}, value)))),
    // replaceChildren, unlike el(), writes a null as the text "null": a zone has no timeline.
    ...(timeline ? [el('h3', {}, 'Yesterday and today'), timeline] : []),
    el('h3', {}, 'Recent events'),
    list,
  );
  const concerns = collection === 'persons' ? (event) => event.person === item.id : (event) => event.zone === item.id;
  renderEvents(list, concerns, `No recent events for ${item.name}.`);
}

// The API's answer updates the page at once; the event that follows changes nothing more.
function remember(collection, item) {
  COLLECTIONS[collection].map().set(item.id, item);
  render();
}

async function rename(collection, item) {
  const name = prompt(`New name for ${item.name}:`, item.name);
  if (name === null || !name.trim() || name.trim() === item.name) return;
  try {
    remember(collection, await api('PATCH', `/api/${collection}/${encodeURIComponent(item.id)}`, { name: name.trim() }));
  } catch (error) {
    alert(error.message);
  }
}

async function remove(collection, item) {
  // Two people of one name are told apart by their ids, as in the lists.
  const who = collection === 'persons' && sharesName(item) ? `${item.name} (${item.id})` : item.name;
  if (!confirm(`Delete ${who}? ${COLLECTIONS[collection].loses(item)}`)) return;
  try {
    await api('DELETE', `/api/${collection}/${encodeURIComponent(item.id)}`);
    COLLECTIONS[collection].map().delete(item.id);
    if (record?.id === item.id) location.hash = '#/overview';
    render();
  } catch (error) {
    alert(error.message);
  }
}

/** Creates a person or zone; a name already taken is asked about (the API refuses it unless confirmed). */
async function create(collection, name) {
  try {
    return await api('POST', `/api/${collection}`, { name });
  } catch (error) {
    const taken = error.status === 409 && error.problem?.errors?.[0]?.path === '/name';
    if (!taken) throw error;
    const what = collection === 'persons' ? 'person' : 'zone';
    // The name as the existing one spells it (the check ignores case and spacing): "called "Bob"", not what was typed.
    const existing = /already called "(.*)"$/s.exec(error.problem.detail ?? '')?.[1] ?? name;
    if (confirm(`There is already a ${what} called "${existing}". Add another ${what} with the same name?`))
      return api('POST', `/api/${collection}`, { name, duplicate_name: true });
    throw new ApiError(409, { errors: [{ path: '/name', message: `Not added: a ${what} is already called "${existing}"` }] });
  }
}

for (const [selector, collection] of [
  ['#zone-form', 'zones'],
  ['#person-form', 'persons'],
  ['#people-form', 'persons'],
]) {
  $(selector).addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget;
    try {
      const created = await busy($('button', form), () => create(collection, form.name.value.trim()));
      clearErrors(form);
      form.reset();
      remember(collection, created);
    } catch (error) {
      const rest = showErrors(form, error);
      if (rest.length) $('[data-error-for="/name"]', form).textContent = rest.join('; ');
    }
  });
}

$('#mode').addEventListener('change', async (event) => {
  const select = event.target;
  try {
    await api('PUT', '/api/system/mode', { mode: select.value });
  } catch (error) {
    alert(error.message);
    // The mode in force, not the one refused.
    if (household.loaded) select.value = household.health.mode;
  }
});
