// The fall banner, on every page while a fall is active: who, where, since when, and "Mark as cleared".
import { api } from './api.js';
import { $, ago, busy, dateTime } from './dom.js';
import { personName, zoneName } from './household.js';

let fall = { state: 'OFF' };
let ticker = null;

export async function loadFall() {
  fall = await api('GET', '/api/system/fall');
  renderFall();
}

/** fall.detected and fall.cleared carry the whole state: who, where and when. */
export function applyToFall(event) {
  if (!event.event_type.startsWith('fall.')) return;
  fall = { state: event.event_type === 'fall.detected' ? 'ON' : 'OFF', person: event.person, zone: event.zone, timestamp: event.timestamp };
  renderFall();
}

export function renderFall() {
  const active = fall.state === 'ON';
  $('#fall-banner').hidden = !active;
  document.title = active ? 'Fall detected · Mothership' : 'Mothership';
  clearInterval(ticker);
  if (!active) return;
  const describe = () =>
    `${fall.person ? personName(fall.person) : 'Someone'}${fall.zone ? ` in ${zoneName(fall.zone)}` : ''}, since ${dateTime(fall.timestamp)} (${ago(fall.timestamp)})`;
  $('#fall-what').textContent = describe();
  ticker = setInterval(() => ($('#fall-what').textContent = describe()), 30_000);
}

$('#fall-clear').addEventListener('click', async (event) => {
  const { person, zone } = fall;
  if (
    !confirm(
      `Mark the fall of ${person ? personName(person) : 'someone'} as cleared? Home Assistant's fall sensor turns off and a fall.cleared event goes to the webhook.`,
    )
  )
    return;
  try {
    const answer = await busy(event.currentTarget, () =>
      api('POST', '/api/events', { type: 'fall.cleared', ...(person ? { person } : {}), ...(zone ? { zone } : {}) }),
    );
    applyToFall(answer.event); // at once, not only when the stream brings it back
  } catch (error) {
    alert(error.message);
  }
});
