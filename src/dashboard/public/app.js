// The Mothership dashboard: plain ES modules, no build step, no third-party requests.
import { lineChart } from './chart.js';

const $ = (selector, root = document) => root.querySelector(selector);
const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

/** Builds an element with text content only (never HTML from data). */
function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (key === 'class') element.className = value;
    else if (key.startsWith('on')) element.addEventListener(key.slice(2), value);
    else element.setAttribute(key, value);
  }
  for (const child of children) element.append(child instanceof Node ? child : document.createTextNode(String(child ?? '')));
  return element;
}

const time = (iso) => (iso ? new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' }) : '-');
const dateTime = (iso) => (iso ? new Date(iso).toLocaleString([], { dateStyle: 'short', timeStyle: 'short' }) : '-');

class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

async function api(method, path, body) {
  const response = await fetch(path, {
    method,
    credentials: 'same-origin',
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const data = text ? JSON.parse(text) : null;
  if (response.status === 401 && path !== '/api/session') showSignIn();
  if (!response.ok) throw new ApiError(response.status, data);
  return data;
}

// ---- field errors: a problem's errors[] go next to the field whose data-error-for matches its path ----

function clearErrors(form) {
  for (const slot of $$('[data-error-for]', form)) {
    slot.textContent = '';
    slot.closest('.field')?.classList.remove('invalid');
  }
}

/** Shows each error next to its field; returns the errors no field claimed. */
function showErrors(form, error, prefix = '') {
  clearErrors(form);
  const unclaimed = [];
  for (const entry of error.problem?.errors ?? []) {
    const slot = $(`[data-error-for="${CSS.escape(entry.path)}"]`, form) ?? $(`[data-error-for="${CSS.escape(prefix + entry.path)}"]`, form);
    if (slot) {
      slot.textContent = entry.message;
      slot.closest('.field')?.classList.add('invalid');
    } else unclaimed.push(`${entry.path} ${entry.message}`);
  }
  if (!error.problem?.errors) unclaimed.push(error.message);
  return unclaimed;
}

function result(output, ok, text) {
  output.replaceChildren(el('span', { class: ok ? 'ok' : 'bad' }, text));
}

async function busy(button, work) {
  button.disabled = true;
  try {
    return await work();
  } finally {
    button.disabled = false;
  }
}

// ---- sign in ----

function showSignIn() {
  stream?.close();
  stream = null;
  $('#app').hidden = true;
  $('#signin').hidden = false;
  $('#signin-form [name=token]').focus();
}

$('#signin-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  try {
    await api('POST', '/api/session', { token: form.token.value });
    form.reset();
    clearErrors(form);
    await start();
  } catch (error) {
    $('[data-error-for="/token"]', form).textContent = error.status === 401 ? 'That token is not right.' : error.message;
  }
});

$('#signout').addEventListener('click', async () => {
  await api('DELETE', '/api/session').catch(() => {});
  showSignIn();
});

// ---- views ----

const loaders = { overview: loadOverview, integrations: loadIntegrations, enrichment: loadEnrichment, baselines: loadBaselines };
let currentView = 'overview';

function showView(name) {
  currentView = name;
  for (const button of $$('nav button')) button.classList.toggle('active', button.dataset.view === name);
  for (const view of $$('.view')) view.hidden = view.id !== `view-${name}`;
  loaders[name]().catch(report);
}
for (const button of $$('nav button')) button.addEventListener('click', () => showView(button.dataset.view));

function report(error) {
  if (!(error instanceof ApiError && error.status === 401)) console.error(error);
}

// ---- overview: persons, zones, health, events (kept live by the event stream) ----

async function loadOverview() {
  const [persons, zones, health] = await Promise.all([api('GET', '/api/persons'), api('GET', '/api/zones'), api('GET', '/api/system/health')]);
  const names = new Map(persons.map((person) => [person.id, person.name]));
  $('#zones').replaceChildren(
    ...(zones.length ? zones : []).map((zone) =>
      el('div', { class: `zone${zone.occupied ? ' occupied' : ''}`, 'data-zone': zone.id },
        el('div', {}, zone.name),
        el('div', { class: 'count' }, zone.count),
        el('div', { class: 'who' }, zone.occupants.map((id) => names.get(id) ?? id).join(', '))),
    ),
  );
  if (!zones.length) $('#zones').append(el('p', { class: 'hint' }, 'No zones yet: POST /api/zones {"name": "Kitchen"}'));
  $('#persons').replaceChildren(
    ...persons.map((person) =>
      el('li', { 'data-person': person.id }, el('span', {}, person.name), el('span', { class: `badge ${person.presence === 'home' ? 'ok' : ''}` }, person.presence === 'home' ? `home${person.zone ? ' · ' + person.zone : ''}` : 'away')),
    ),
  );
  $('#node-count').textContent = health.node_count;
  $('#quality').textContent = health.quality === null ? '-' : `${health.quality}%`;
  $('#mode').value = health.mode;
  if (!$('#events').children.length) {
    const history = await api('GET', '/api/events?order=desc&limit=30');
    for (const event of history.events.reverse()) addEvent(event);
  }
}

function addEvent(event) {
  const list = $('#events');
  if (event.seq && list.querySelector(`[data-seq="${event.seq}"]`)) return;
  const subject = [event.person, event.zone].filter(Boolean).join(' @ ');
  list.prepend(
    el('li', { 'data-seq': event.seq ?? '', class: event.severity },
      el('time', { datetime: event.timestamp }, time(event.timestamp)),
      el('span', { class: event.severity }, event.event_type),
      el('span', {}, subject || summarize(event.detail))),
  );
  while (list.children.length > 100) list.lastElementChild.remove();
}

function summarize(detail) {
  const text = Object.entries(detail ?? {}).slice(0, 3).map(([key, value]) => `${key}: ${typeof value === 'object' ? JSON.stringify(value) : value}`).join(', ');
  return text.length > 90 ? text.slice(0, 89) + '…' : text;
}

$('#mode').addEventListener('change', (event) => api('PUT', '/api/system/mode', { mode: event.target.value }).catch(report));

// ---- live updates ----

const EVENT_TYPES = [
  'zone.entry', 'zone.exit', 'presence.changed', 'fall.detected', 'fall.cleared', 'anomaly.detected', 'system.health', 'system.mode_changed',
  'person.created', 'person.updated', 'person.deleted', 'zone.created', 'zone.updated', 'zone.deleted',
  'enrichment.requested', 'enrichment.completed', 'enrichment.failed', 'baseline.recorded', 'webhook.test',
];
let stream = null;
let refreshTimer = null;

function refreshSoon() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(() => loaders[currentView]().catch(report), 150);
}

function connectStream() {
  stream?.close();
  stream = new EventSource('/api/events/stream');
  stream.onopen = () => {
    $('#live').textContent = 'live';
    $('#live').className = 'badge ok';
  };
  stream.onerror = () => {
    $('#live').textContent = 'reconnecting';
    $('#live').className = 'badge warn';
  };
  for (const type of EVENT_TYPES) {
    stream.addEventListener(type, (message) => {
      addEvent({ seq: Number(message.lastEventId), ...JSON.parse(message.data) });
      refreshSoon();
    });
  }
}

// ---- integrations ----

function fill(form, values) {
  for (const [name, value] of Object.entries(values)) {
    const input = form.elements.namedItem(name);
    if (!input || input.type === 'password') continue; // secrets are never prefilled
    if (input.type === 'checkbox') input.checked = Boolean(value);
    else if (document.activeElement !== input) input.value = value ?? '';
  }
}

function statusBadge(badge, text, kind) {
  badge.textContent = text;
  badge.className = `badge ${kind}`;
}

async function loadIntegrations() {
  const settings = await api('GET', '/api/settings/integration');
  const mqttForm = $('#mqtt-form');
  const webhookForm = $('#webhook-form');
  fill(mqttForm, settings.mqtt);
  fill(webhookForm, settings.webhook);
  mqttForm.password.placeholder = settings.mqtt.password_set ? '•••••••• (saved; type to replace)' : '';
  mqttForm.ca_cert.placeholder = settings.mqtt.ca_cert_set ? 'A CA certificate is saved; paste another to replace it' : '-----BEGIN CERTIFICATE-----';
  webhookForm.secret.placeholder = settings.webhook.secret_set ? '•••••••• (saved; type to replace)' : 'whsec_...';
  const mqtt = settings.mqtt.status;
  if (!settings.mqtt.enabled) statusBadge($('#mqtt-status'), 'disabled', '');
  else if (mqtt.connected) statusBadge($('#mqtt-status'), 'connected', 'ok');
  else statusBadge($('#mqtt-status'), mqtt.next_reconnect_at ? `retrying ${time(mqtt.next_reconnect_at)}` : 'disconnected', 'bad');
  $('#mqtt-last-error').hidden = !mqtt.last_error || mqtt.connected;
  $('#mqtt-last-error').textContent = mqtt.last_error ? `Last error: ${mqtt.last_error}` : '';
  const hook = settings.webhook.status;
  if (!settings.webhook.enabled) statusBadge($('#webhook-status'), 'disabled', '');
  else if (hook.last_status_code === null && !hook.last_error) statusBadge($('#webhook-status'), 'no deliveries yet', '');
  else statusBadge($('#webhook-status'), hook.last_error ? `last: ${hook.last_error}` : `last: ${hook.last_status_code}`, hook.last_error ? 'bad' : 'ok');
  await loadDeliveries();
}

async function loadDeliveries() {
  const deliveries = await api('GET', '/api/webhook/deliveries?limit=30');
  $('#deliveries tbody').replaceChildren(
    ...deliveries.map((row) =>
      el('tr', { 'data-state': row.state },
        el('td', {}, time(row.attempted_at ?? row.created_at)),
        el('td', {}, row.event_type),
        el('td', { class: 'num' }, row.attempt),
        el('td', {}, row.state.replace('_', ' ')),
        el('td', { class: 'num' }, row.status_code ?? '-'),
        el('td', {}, row.error ?? ''),
        el('td', { class: 'num' }, row.duration_ms ?? '-'),
        el('td', {}, el('button', { type: 'button', onclick: () => api('POST', `/api/webhook/deliveries/${row.id}/redeliver`).then(loadDeliveries).catch(report) }, 'Redeliver'))),
    ),
  );
}

function mqttValues(form) {
  const values = {
    enabled: form.enabled.checked,
    broker_url: form.broker_url.value.trim(),
    username: form.username.value,
    tls: form.tls.checked,
    tls_insecure: form.tls_insecure.checked,
    discovery_prefix: form.discovery_prefix.value.trim(),
    topic_root: form.topic_root.value.trim(),
  };
  // Write-only fields: left empty they keep the saved value.
  if (form.password.value) values.password = form.password.value;
  else if (form.clear_password.checked) values.password = null;
  if (form.ca_cert.value.trim()) values.ca_cert = form.ca_cert.value.trim();
  return values;
}

function webhookValues(form) {
  const values = { enabled: form.enabled.checked, url: form.url.value.trim() };
  if (form.secret.value) values.secret = form.secret.value.trim();
  return values;
}

function bindSettingsForm(form, group, values, output) {
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    try {
      await busy($('button[type=submit]', form), () => api('POST', '/api/settings/integration', { [group]: values(form) }));
      clearErrors(form);
      for (const input of $$('input[type=password], textarea', form)) input.value = '';
      if (form.clear_password) form.clear_password.checked = false;
      result(output, true, 'Saved.');
      await loadIntegrations();
      if (group === 'mqtt') watchMqttStatus();
    } catch (error) {
      const rest = showErrors(form, error);
      result(output, false, rest.length ? rest.join('\n') : 'Please fix the highlighted fields.');
    }
  });
}
bindSettingsForm($('#mqtt-form'), 'mqtt', mqttValues, $('#mqtt-result'));
bindSettingsForm($('#webhook-form'), 'webhook', webhookValues, $('#webhook-result'));

/** After a save the connection takes a moment: poll the status for a few seconds. */
function watchMqttStatus() {
  let polls = 0;
  const timer = setInterval(() => {
    if (++polls > 10 || currentView !== 'integrations') return clearInterval(timer);
    loadIntegrations().catch(report);
  }, 500);
}

async function runTest(button, target, form, values, output) {
  try {
    const outcome = await busy(button, () => api('POST', '/api/settings/integration/test', { target, [target]: values(form) }));
    const entry = outcome[target];
    clearErrors(form);
    if (entry.ok) result(output, true, target === 'mqtt' ? `Connected to the broker in ${entry.latency_ms} ms.` : `Test delivery answered ${entry.status_code} in ${entry.latency_ms} ms.`);
    else result(output, false, `${target === 'mqtt' ? 'Could not connect' : 'Test delivery failed'}: ${entry.error ?? 'HTTP ' + entry.status_code}`);
    if (target === 'webhook') await loadDeliveries();
  } catch (error) {
    const rest = showErrors(form, error);
    result(output, false, rest.length ? rest.join('\n') : 'Please fix the highlighted fields.');
  }
}

$('#mqtt-test').addEventListener('click', (event) => runTest(event.currentTarget, 'mqtt', $('#mqtt-form'), mqttValues, $('#mqtt-result')));
$('#webhook-test').addEventListener('click', (event) => runTest(event.currentTarget, 'webhook', $('#webhook-form'), webhookValues, $('#webhook-result')));

$('#mqtt-discovery').addEventListener('click', async (event) => {
  try {
    const { published } = await busy(event.currentTarget, () => api('POST', '/api/settings/integration/discovery'));
    result($('#mqtt-result'), true, `Published ${published} discovery configs.`);
  } catch (error) {
    result($('#mqtt-result'), false, error.status === 409 ? 'MQTT is not connected: save working settings first.' : error.message);
  }
});

$('#webhook-generate').addEventListener('click', async (event) => {
  try {
    const { secret } = await busy(event.currentTarget, () => api('POST', '/api/settings/integration/webhook-secret'));
    const box = $('#webhook-new-secret');
    box.hidden = false;
    box.textContent = `New secret (shown once, copy it to your receiver): ${secret}`;
    await loadIntegrations();
  } catch (error) {
    result($('#webhook-result'), false, error.message);
  }
});

// ---- enrichment ----

async function loadEnrichment() {
  const [bots, matches] = await Promise.all([api('GET', '/api/bots'), api('GET', '/api/matches?limit=50')]);
  $('#bots').replaceChildren(...bots.map((bot) => el('li', {}, el('span', {}, `${bot.name} (${bot.id})`), el('span', { class: 'hint' }, dateTime(bot.created_at)))));
  if (!bots.length) $('#bots').append(el('li', { class: 'hint' }, 'No bots yet.'));
  const kinds = { completed: 'ok', failed: 'bad', running: 'warn', queued: 'warn' };
  $('#matches tbody').replaceChildren(
    ...matches.map((match) =>
      el('tr', { 'data-match': match.id },
        el('td', {}, match.id),
        el('td', {}, match.status),
        el('td', {}, el('span', { class: `badge ${kinds[match.enrichment.status] ?? ''}`, title: match.enrichment.error ?? match.enrichment.commentary ?? '' }, match.enrichment.status ?? 'not requested')),
        el('td', {}, dateTime(match.enrichment_requested_at))),
    ),
  );
}

$('#bot-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  try {
    const bot = await api('POST', '/api/bots', { name: form.name.value.trim() });
    clearErrors(form);
    form.reset();
    const box = $('#bot-secret');
    box.hidden = false;
    box.textContent = `Bot "${bot.id}" created. Shared secret (shown once): ${bot.shared_secret}`;
    await loadEnrichment();
  } catch (error) {
    showErrors(form, error);
  }
});

// ---- baselines ----

const TOOL_COLORS = { subject: '#1f8a7c', alpha: '#3b6fb6', beta: '#b7791f', gamma: '#8e44ad' };

async function loadBaselines() {
  const runs = (await api('GET', '/api/baselines?limit=200')).reverse();
  const labels = runs.map((run) => run.record.commit_sha.slice(0, 7));
  const values = (field) => runs.map((run) => (typeof run.record[field] === 'number' ? run.record[field] : null));
  lineChart($('#chart-geomean'), {
    labels,
    unit: 's',
    series: Object.entries(TOOL_COLORS).map(([tool, color]) => ({ name: tool, color, values: values(`${tool}_geomean`) })),
  });
  lineChart($('#chart-grep'), { labels, unit: 'ms', series: [{ name: 'grep 1000', color: '#1f3b57', values: values('grep_1000_mean_ms') }] });

  const body = $('#comparison tbody');
  body.replaceChildren();
  if (runs.length < 2) {
    $('#comparison-verdict').textContent = 'Record two baselines to compare them.';
    return;
  }
  const report = await api('GET', `/api/baselines/compare?base=${runs.at(-2).id}&head=${runs.at(-1).id}`);
  $('#comparison-verdict').textContent = report.regressed ? `Regressed beyond ${report.threshold_pct}%: ${report.regressions.join(', ')}` : `No regression beyond ${report.threshold_pct}% (${report.base.commit_sha} → ${report.head.commit_sha})`;
  const pct = (value) => (value === null ? '-' : `${value > 0 ? '+' : ''}${value.toFixed(1)}%`);
  for (const metric of report.metrics.filter((entry) => entry.status !== 'missing')) {
    body.append(el('tr', { class: metric.regression ? 'regression' : '' }, el('td', {}, `${metric.field} (${metric.unit})`), el('td', { class: 'num' }, metric.base), el('td', { class: 'num' }, metric.head), el('td', { class: 'num' }, pct(metric.change_pct))));
  }
  for (const speedup of report.speedups.filter((entry) => entry.status !== 'missing')) {
    body.append(el('tr', { class: speedup.regression ? 'regression' : '' }, el('td', {}, `speedup vs ${speedup.tool} (×)`), el('td', { class: 'num' }, speedup.base), el('td', { class: 'num' }, speedup.head), el('td', { class: 'num' }, pct(speedup.change_pct))));
  }
}

// ---- start ----

async function start() {
  try {
    await api('GET', '/api/system/health');
  } catch {
    return; // showSignIn() already ran on the 401
  }
  $('#signin').hidden = true;
  $('#app').hidden = false;
  connectStream();
  showView(currentView);
}

start();
