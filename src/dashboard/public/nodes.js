// Nodes: each sensing node with its last heartbeat, quality and online state. node.online and
// node.offline change a row at once; heartbeats are not events, so the times are re-read every
// 15 s while the page is open.
import { api, report } from './api.js';
import { $, ago, dateTime, el, emptyState, row } from './dom.js';

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
    timer = setInterval(() => (isOpen() ? load().catch(report) : clearInterval(timer)), REFRESH_MS);
    await load();
  },
  apply(event) {
    if (!nodes || !event.event_type.startsWith('node.')) return;
    const { node: id, quality, last_seen } = event.detail;
    const changed = { id, quality, last_seen, online: event.event_type === 'node.online' };
    const index = nodes.findIndex((known) => known.id === id);
    if (index === -1) nodes.push(changed);
    else nodes[index] = changed;
    nodes.sort((a, b) => a.id.localeCompare(b.id));
    if (isOpen()) render();
  },
};

const isOpen = () => !$('#view-nodes').hidden;

async function load() {
  nodes = await api('GET', '/api/nodes');
  render();
}

function render() {
  const body = $('#nodes tbody');
  if (!nodes) return;
  const online = nodes.filter((node) => node.online).length;
  $('#nodes-summary').textContent = nodes.length ? `${online} of ${nodes.length} online` : '';
  body.replaceChildren(
    ...nodes.map((node) =>
      row({ 'data-node': node.id, class: node.id === selected ? 'selected' : undefined }, [
        ['Node', el('a', { href: `#/nodes/${encodeURIComponent(node.id)}` }, node.id)],
        ['State', el('span', { class: `badge ${node.online ? 'ok' : 'bad'}` }, node.online ? 'online' : 'offline')],
        ['Quality', `${node.quality}%`, 'num'],
        ['Last heartbeat', el('span', { title: dateTime(node.last_seen) }, ago(node.last_seen))],
      ]),
    ),
  );
  if (!nodes.length)
    body.append(
      emptyState(
        'tr',
        'No nodes yet. A sensing node appears here with its first heartbeat, and turns offline when it has been silent for the node timeout (30 s by default).',
        4,
      ),
    );
  $('tr.selected', body)?.scrollIntoView({ block: 'nearest' });
}
