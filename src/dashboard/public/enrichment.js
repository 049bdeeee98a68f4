// Enrichment: bots with their quota and secrets, matches with their commentary.
// #/enrichment/matches/<id> opens a match's commentary, #/enrichment/bots/<id> marks a bot.
import { api } from './api.js';
import { $, busy, clearErrors, dateTime, debounce, el, emptyState, row, showProblem } from './dom.js';

let bots = null;
let matches = null;
let selected = null; // ['matches' | 'bots', id]
let stale = false;
const refetch = new Set(); // matches whose commentary or error an event announced but does not carry

export const enrichment = {
  id: 'enrichment',
  async show(params = []) {
    selected = params.length === 2 ? params : null;
    render();
    if (!matches || stale) await load();
    else render();
  },
  apply(event) {
    if (!matches || !event.event_type.startsWith('enrichment.')) return;
    const { match_id: matchId, bot_id: botId } = event.detail;
    const match = matches.find((known) => known.id === matchId);
    if (event.event_type === 'enrichment.requested') {
      const bot = bots.find((known) => known.id === botId);
      if (bot) bot.quota.used += 1;
      if (match)
        Object.assign(match, { enrichment_requested_at: event.timestamp, enrichment: { status: 'queued', commentary: null, error: null, completed_at: null } });
    }
    // A match created since the list was read, or a result the event does not carry: read that match.
    if (!match || event.event_type !== 'enrichment.requested') {
      refetch.add(matchId);
      if (!$('#view-enrichment').hidden) refetchMatches();
      else stale = true;
    }
    if (!$('#view-enrichment').hidden) render();
  },
};

const refetchMatches = debounce(
  async () => {
    const ids = [...refetch];
    refetch.clear();
    const fresh = await Promise.all(ids.map((id) => api('GET', `/api/matches/${encodeURIComponent(id)}`).catch(() => null)));
    for (const match of fresh.filter(Boolean)) {
      const index = matches.findIndex((known) => known.id === match.id);
      if (index === -1) matches.unshift(match);
      else matches[index] = match;
    }
    render();
  },
  300,
  2000,
);

async function load() {
  [bots, matches] = await Promise.all([api('GET', '/api/bots'), api('GET', '/api/matches?limit=50')]);
  stale = false;
  refetch.clear();
  render();
}

const KINDS = { completed: 'ok', failed: 'bad', running: 'warn', queued: 'warn' };

function render() {
  if (!matches) return;
  $('#bots').replaceChildren(
    ...bots.map((bot) =>
      el(
        'li',
        { 'data-bot': bot.id, class: selected?.[0] === 'bots' && selected[1] === bot.id ? 'selected' : undefined },
        el(
          'span',
          {},
          el('a', { href: `#/enrichment/bots/${encodeURIComponent(bot.id)}` }, bot.name),
          ` (${bot.id})`,
          el(
            'small',
            { class: 'hint' },
            ` · ${bot.quota.used} of ${bot.quota.limit} requests in 24 h${bot.previous_secret_expires_at && Date.parse(bot.previous_secret_expires_at) > Date.now() ? ` · old secret valid until ${dateTime(bot.previous_secret_expires_at)}` : ''}`,
          ),
        ),
        el(
          'span',
          { class: 'row-actions' },
          el('button', { type: 'button', class: 'link', onclick: () => rotateBot(bot), 'aria-label': `Rotate the secret of ${bot.name}` }, 'Rotate secret'),
          el('button', { type: 'button', class: 'link danger', onclick: () => deleteBot(bot), 'aria-label': `Delete ${bot.name}` }, 'Delete'),
        ),
      ),
    ),
  );
  if (!bots.length)
    $('#bots').append(emptyState('li', 'No bots yet. Create one for each program that requests commentary; it signs its requests with the secret shown once.'));

  const open = selected?.[0] === 'matches' ? selected[1] : null;
  const body = $('#matches tbody');
  body.replaceChildren(
    ...matches.map((match) => {
      const { status, commentary, error } = match.enrichment;
      const badge = el('span', { class: `badge ${KINDS[status] ?? ''}` }, status ?? 'not requested');
      return row({ 'data-match': match.id, class: match.id === open ? 'selected' : undefined }, [
        ['Match', el('a', { href: `#/enrichment/matches/${encodeURIComponent(match.id)}` }, match.id)],
        ['Status', match.status],
        [
          'Enrichment',
          commentary || error
            ? el('details', { open: match.id === open }, el('summary', {}, badge), el('p', { class: error ? 'error-text' : 'commentary' }, commentary ?? error))
            : badge,
        ],
        ['Requested', dateTime(match.enrichment_requested_at)],
      ]);
    }),
  );
  if (!matches.length)
    body.append(emptyState('tr', 'No matches yet. Your game server posts each match; a bot then asks for its commentary, which appears here.', 4));
  $('.selected', $('#view-enrichment'))?.scrollIntoView({ block: 'nearest' });
}

function showBotSecret(text) {
  const box = $('#bot-secret');
  box.hidden = false;
  box.textContent = text;
}

async function rotateBot(bot) {
  if (!confirm(`Give ${bot.name} a new secret? The current one keeps working for 24 hours, so the bot can be updated without downtime.`)) return;
  try {
    const rotated = await api('POST', `/api/bots/${encodeURIComponent(bot.id)}/rotate-secret`);
    showBotSecret(`New secret for "${bot.id}" (shown once; the old one works until ${dateTime(rotated.previous_secret_expires_at)}): ${rotated.shared_secret}`);
    await load();
  } catch (error) {
    alert(error.message);
  }
}

async function deleteBot(bot) {
  if (!confirm(`Delete ${bot.name}? Its signed requests are refused from now on; its jobs already queued still run.`)) return;
  try {
    await api('DELETE', `/api/bots/${encodeURIComponent(bot.id)}`);
    await load();
  } catch (error) {
    alert(error.message);
  }
}

$('#bot-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  try {
    const bot = await busy($('button', form), () => api('POST', '/api/bots', { name: form.name.value.trim() }));
    clearErrors(form);
    form.reset();
    showBotSecret(`Bot "${bot.id}" created. Shared secret (shown once): ${bot.shared_secret}`);
    await load();
  } catch (error) {
    showProblem(form, error);
  }
});
