// API tokens: list (never the token), create (the token shown once, with a Copy button), revoke.
// #/tokens/<id> marks a token.
import { api } from './api.js';
import { $, ago, busy, clearErrors, copyRow, dateTime, el, emptyState, row, showProblem } from './dom.js';

let tokens = null;
let selected = null;

const SCOPES = {
  ingest: 'posts events and heartbeats',
  read: 'reads everything, changes nothing',
  ci: 'pushes and reads benchmark baselines',
  admin: 'everything',
};
// The badge says how much a token can do: admin stands out.
const SCOPE_KINDS = { ingest: '', read: 'ok', ci: '', admin: 'warn' };

export const tokensView = {
  id: 'tokens',
  async show(params = []) {
    selected = params[0] ?? null;
    if (!selected) forgetNewToken();
    render();
    await load();
  },
  apply() {},
};

async function load() {
  tokens = await api('GET', '/api/tokens');
  render();
}

function render() {
  if (!tokens) return;
  const body = $('#tokens tbody');
  body.replaceChildren(
    ...tokens.map((token) =>
      row({ 'data-token': token.id, class: token.id === selected ? 'selected' : undefined }, [
        ['Token', el('span', {}, el('a', { href: `#/tokens/${encodeURIComponent(token.id)}` }, token.name), el('small', { class: 'hint' }, ` (${token.id})`))],
        ['Scope', el('span', { class: `badge ${SCOPE_KINDS[token.scope]}`, title: SCOPES[token.scope] }, token.scope)],
        ['Created', dateTime(token.created_at)],
        ['Last used', token.last_used_at ? ago(token.last_used_at) : 'never'],
        ['', el('button', { type: 'button', class: 'link danger', onclick: () => revoke(token), 'aria-label': `Revoke ${token.name}` }, 'Revoke')],
      ]),
    ),
  );
  if (!tokens.length)
    body.append(
      emptyState(
        'tr',
        'No API tokens yet. Create one for each sensor node (ingest), for Home Assistant or Grafana (read), for a CI job (ci), or for a script (admin).',
        5,
      ),
    );
  $('.selected', $('#view-tokens'))?.scrollIntoView({ block: 'nearest' });
}

/** Shown once: a new token does not survive leaving the page, not even in a hidden element. */
function forgetNewToken() {
  $('#token-new').hidden = true;
  $('#token-new').replaceChildren();
}

function showNewToken(created) {
  $('#token-new').hidden = false;
  $('#token-new').replaceChildren(
    el('p', {}, `Token "${created.name}" (${created.scope}) created. Copy it now: it is shown only once.`),
    copyRow(created.token, 'The new token'),
    el('p', { class: 'hint' }, 'Send it in the Authorization header: Bearer mst_…'),
  );
}

async function revoke(token) {
  if (!confirm(`Revoke "${token.name}"? Whatever uses it (${SCOPES[token.scope]}) is refused from now on; this cannot be undone.`)) return;
  try {
    await api('DELETE', `/api/tokens/${encodeURIComponent(token.id)}`);
    forgetNewToken();
    await load();
  } catch (error) {
    alert(error.message);
  }
}

$('#token-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  try {
    const created = await busy($('button', form), () => api('POST', '/api/tokens', { name: form.name.value.trim(), scope: form.scope.value }));
    clearErrors(form);
    form.reset();
    showNewToken(created);
    await load();
  } catch (error) {
    showProblem(form, error);
  }
});
