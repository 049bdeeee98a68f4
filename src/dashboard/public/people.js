// People: everyone, searchable, in a list that draws only the rows on screen, so 5,000 people cost
// what 20 do. The household is the shared state (household.js), kept current by the event stream.
import { $, el, emptyState } from './dom.js';
import { household, loadHousehold } from './household.js';
import { personItem } from './overview.js';

/** Every row is this tall (style.css, .people-list li), so the list knows which rows are on screen without measuring them. */
const ROW_PX = 48;
/** Rows drawn above and below the visible ones, so a quick scroll shows no gap. */
const OVERSCAN = 8;

let matches = [];
/** Everyone by name, sorted once per change of the household rather than per keystroke. */
let everyone = null;
const byName = new Intl.Collator(undefined, { numeric: true }).compare;

export const peopleView = {
  id: 'people',
  async show() {
    if (!household.loaded) await loadHousehold();
    everyone = null;
    filter();
  },
  apply(event) {
    if (!/^(person\.|zone\.|presence\.)/.test(event.event_type)) return;
    if (event.event_type.startsWith('person.')) everyone = null;
    if (isOpen()) filter(false);
  },
};

const isOpen = () => !$('#view-people').hidden;

/** What the search box keeps: a name or id containing the words, in any case. `top`: back to the first row (a new search). */
function filter(top = true) {
  const words = $('#people-search').value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  everyone ??= [...household.persons.values()]
    .sort((a, b) => byName(a.name, b.name) || byName(a.id, b.id))
    .map((person) => ({ person, text: `${person.name.toLowerCase()} ${person.id}` }));
  matches = (words.length ? everyone.filter(({ text }) => words.every((word) => text.includes(word))) : everyone).map(({ person }) => person);
  const count = everyone.length.toLocaleString();
  $('#people-count').textContent = words.length ? `${matches.length.toLocaleString()} of ${count}` : count;
  if (top) $('#people-list').scrollTop = 0;
  draw();
}

/** Draws the rows in view: a spacer holds the height of the rows above and below. */
function draw() {
  const list = $('#people-list');
  if (!matches.length) {
    list.replaceChildren(
      emptyState(
        'li',
        household.persons.size ? 'Nobody matches the search.' : 'No people yet. Add the people who live here; each gets a presence sensor in Home Assistant.',
      ),
    );
    return;
  }
  // The list is as tall as its rows up to its most (style.css): drawn from a short one (Loading…), it
  // grows to as much as the window shows.
  const viewport = Math.max(list.clientHeight, window.innerHeight);
  const first = Math.max(0, Math.floor(list.scrollTop / ROW_PX) - OVERSCAN);
  const last = Math.min(matches.length, Math.ceil((list.scrollTop + viewport) / ROW_PX) + OVERSCAN);
  list.replaceChildren(
    el('li', { class: 'spacer', 'aria-hidden': 'true', 'data-height': first * ROW_PX }),
    ...matches.slice(first, last).map((person) => personItem(person)),
    el('li', { class: 'spacer', 'aria-hidden': 'true', 'data-height': (matches.length - last) * ROW_PX }),
  );
  // The page's CSP allows no inline style attribute; a spacer's height is set through the CSSOM.
  for (const spacer of list.querySelectorAll('.spacer')) spacer.style.height = `${spacer.dataset.height}px`;
}

let scheduled = false;
$('#people-list').addEventListener('scroll', () => {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => {
    scheduled = false;
    draw();
  });
});
$('#people-search').addEventListener('input', () => filter());
