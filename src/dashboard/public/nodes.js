// Nodes: each sensing node with its last heartbeat, quality and online state, its name and zone
// (set here: Rename, the zone list, Remove: admins only, as the API allows). node.online and node.offline change a row at once;
// heartbeats are not events, so the times are re-read every 15 s while the page is open.
import { isHousehold } from './account.js';
import { api, apiAll, loadView } from './api.js';
import { $, ago, dateTime, el, emptyState, row } from './dom.js';
import { household, zoneName } from './household.js';

const REFRESH_MS = 15_000;
let nodes = null;
let selected = null;
let timer = null;

export const nodesView = {
  id: 'nodes',
  async show(params = []) {
    selected = params[0] ?? null;
    render();
    clearInterval(timer);
    timer = setInterval(() => (isOpen() ? loadView('nodes', load) : clearInterval(timer)), REFRESH_MS);
    await load();
  },
  apply(event) {
    if (!nodes || !event.event_type.startsWith('node.')) return;
    const { node: id, quality, last_seen } = event.detail;
    const changed = { quality, last_seen, online: event.event_type === 'node.online' };
    const index = nodes.findIndex((known) => known.id === id);
    if (index === -1) nodes.push({ id, name: null, zone: null, ...changed });
    else nodes[index] = { ...nodes[index], ...changed };
    nodes.sort((a, b) => a.id.localeCompare(b.id));
    if (isOpen()) render();
  },
};

const isOpen = () => !$('#view-nodes').hidden;

async function load() {
  nodes = await apiAll('/api/nodes');
  render();
}

// The API's answer updates the row at once (these changes announce no event).
function remember(node) {
  nodes = nodes.map((known) => (known.id === node.id ? node : known));
  render();
}

async function change(node, body) {
  try {
    remember(await api('PATCH', `/api/nodes/${encodeURIComponent(node.id)}`, body));
  } catch (error) {
    alert(error.message);
    render();
  }
}

function rename(node) {
  const name = prompt(`New name for ${node.name ?? node.id}:`, node.name ?? '');
  if (name === null || !name.trim() || name.trim() === node.name) return;
  return change(node, { name: name.trim() });
}

async function remove(node) {
  const what = node.name ?? node.id;
  if (!confirm(`Remove ${what}? It is forgotten; if it sends another heartbeat it is registered again.`)) return;
  try {
    await api('DELETE', `/api/nodes/${encodeURIComponent(node.id)}`);
    nodes = nodes.filter((known) => known.id !== node.id);
    render();
  } catch (error) {
    alert(error.message);
  }
}

function zoneSelect(node) {
  const zones = [...household.zones.values()].sort((a, b) => a.name.localeCompare(b.name));
  // A zone the page does not know (yet) stays selectable under its id.
  if (node.zone && !household.zones.has(node.zone)) zones.push({ id: node.zone, name: zoneName(node.zone) });
  return el(
    'select',
    { 'aria-label': `Zone of ${node.name ?? node.id}`, class: 'node-zone', onchange: (event) => change(node, { zone: event.target.value || null }) },
    el('option', { value: '' }, 'No zone'),
    ...zones.map((zone) => el('option', { value: zone.id, selected: zone.id === node.zone }, zone.name)),
  );
}

function render() {
  const body = $('#nodes tbody');
  if (!nodes) return;
  const online = nodes.filter((node) => node.online).length;
  $('#nodes-summary').textContent = nodes.length ? `${online} of ${nodes.length} online` : '';
  body.replaceChildren(
    ...nodes.map((node) =>
      row({ 'data-node': node.id, class: node.id === selected ? 'selected' : undefined }, [
        [
          'Node',
          // One element: on a phone the cell spreads its children apart, and name and id belong together.
          el(
            'span',
            {},
            el('a', { href: `#/nodes/${encodeURIComponent(node.id)}` }, node.name ?? node.id),
            node.name ? el('span', { class: 'hint' }, ` ${node.id}`) : null,
          ),
        ],
        ['Zone', zoneSelect(node)],
        ['State', el('span', { class: `badge ${node.online ? 'ok' : 'bad'}` }, node.online ? 'online' : 'offline')],
        ['Quality', `${node.quality}%`, 'num'],
        ['Last heartbeat', el('span', { title: dateTime(node.last_seen), class: 'nowrap' }, ago(node.last_seen))],
        [
          '',
          el(
            'span',
            { class: 'row-actions' },
            el('button', { type: 'button', class: 'link', onclick: () => rename(node), 'aria-label': `Rename ${node.name ?? node.id}` }, 'Rename'),
            isHousehold()
              ? null
              : el('button', { type: 'button', class: 'link danger', onclick: () => remove(node), 'aria-label': `Remove ${node.name ?? node.id}` }, 'Remove'),
          ),
        ],
      ]),
    ),
  );
  if (!nodes.length)
    body.append(
      emptyState(
        'tr',
        'No nodes yet. A sensing node appears here with its first heartbeat, and turns offline when it has been silent for the node timeout (30 s by default).',
        6,
      ),
    );
  $('tr.selected', body)?.scrollIntoView({ block: 'nearest' });
}
