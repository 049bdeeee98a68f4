// Element helpers, formatting and form feedback, shared by every view. Text only: data never becomes HTML.

export const $ = (selector, root = document) => root.querySelector(selector);
export const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

/** Builds an element; `on...` attributes become listeners, children become text unless they are nodes. */
export function el(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') element.className = value;
    else if (key.startsWith('on')) element.addEventListener(key.slice(2), value);
    else element.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** A table row whose cells carry their column's name, shown as a label when a phone stacks the row. */
export function row(attributes, cells) {
  // An empty cell stays empty (no text node), so a phone can leave it out.
  return el(
    'tr',
    attributes,
    ...cells.map(([label, content, cellClass]) => el('td', { 'data-label': label, class: cellClass }, content === '' ? null : content)),
  );
}

/** What a list or table shows when it has nothing: a sentence that says what would appear and how. */
export function emptyState(tag, text, columns) {
  if (tag === 'tr') return el('tr', { class: 'empty' }, el('td', { colspan: columns }, text));
  return el(tag, { class: 'empty' }, text);
}

export const time = (iso) => (iso ? new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit' }) : '-');
export const dateTime = (iso) => (iso ? new Date(iso).toLocaleString([], { dateStyle: 'short', timeStyle: 'short' }) : '-');

export function ago(iso) {
  const seconds = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (seconds < 60) return seconds < 10 ? 'just now' : `${seconds} s ago`;
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return `${minutes} min ago`;
  return minutes < 24 * 60 ? `${Math.floor(minutes / 60)} h ${minutes % 60} min ago` : dateTime(iso);
}

/**
 * Runs `task` once, `waitMs` after the last call, and at most once per `maxWaitMs`: a steady flow of
 * calls still gets a run every `maxWaitMs`, and a slow server (calls further apart than `waitMs`)
 * does not turn it into one run per call.
 */
export function debounce(task, waitMs, maxWaitMs = waitMs * 4) {
  let timer = null;
  let first = 0;
  let lastRun = -Infinity;
  return () => {
    const at = Date.now();
    if (!timer) first = at;
    clearTimeout(timer);
    const due = Math.max(Math.min(at + waitMs, first + maxWaitMs), lastRun + maxWaitMs);
    timer = setTimeout(
      () => {
        timer = null;
        lastRun = Date.now();
        task();
      },
      Math.max(0, due - at),
    );
  };
}

// ---- form feedback: a problem's errors[] go next to the field whose data-error-for matches its path ----

/** The input a message slot belongs to (they share the .field label). */
const inputOf = (slot) => slot.closest('.field')?.querySelector('input, select, textarea');

/** Each form's line under it for what no field claims (showProblem). */
const formLines = new WeakMap();

export function clearErrors(form) {
  for (const slot of $$('[data-error-for]', form)) {
    slot.textContent = '';
    slot.closest('.field')?.classList.remove('invalid');
    inputOf(slot)?.removeAttribute('aria-invalid');
  }
  const line = formLines.get(form);
  if (line) line.hidden = true;
}

/** Shows each error next to its field; returns the errors no field claimed. */
export function showErrors(form, error, prefix = '') {
  clearErrors(form);
  const unclaimed = [];
  for (const entry of error.problem?.errors ?? []) {
    const slot = $(`[data-error-for="${CSS.escape(entry.path)}"]`, form) ?? $(`[data-error-for="${CSS.escape(prefix + entry.path)}"]`, form);
    if (slot) {
      slot.textContent = entry.message;
      slot.closest('.field')?.classList.add('invalid');
      // A screen reader says the message as it appears, and again with the field it belongs to.
      slot.setAttribute('role', 'alert');
      inputOf(slot)?.setAttribute('aria-invalid', 'true');
    } else unclaimed.push(`${entry.path} ${entry.message}`);
  }
  if (!error.problem?.errors) unclaimed.push(error.message);
  return unclaimed;
}

/**
 * Shows each error next to its field, and what no field claims (a 403, a server error: the problem's
 * detail) on a line under the form, so that no refusal goes unsaid.
 */
export function showProblem(form, error) {
  const rest = showErrors(form, error);
  let line = formLines.get(form);
  if (!line) {
    // After the form, not in it: an inline form lays its children out in one row.
    line = el('p', { class: 'error-text form-problem', role: 'alert' });
    form.after(line);
    formLines.set(form, line);
  }
  line.textContent = rest.join('\n');
  line.hidden = !rest.length;
}

// ---- a page that could not be loaded says why at its top ----

/** Says at the top of a page why it could not be read; a 403 that this account may not see it (its content is hidden, not shown empty). */
export function pageProblem(viewId, error) {
  if (error?.status === 401) return; // the sign-in form is showing
  const section = $(`#view-${viewId}`);
  let box = $(':scope > .page-problem', section);
  if (!box) {
    box = el('div', { class: 'card page-problem', role: 'alert' });
    section.prepend(box);
  }
  const refused = error?.status === 403;
  section.classList.toggle('refused', refused);
  box.hidden = false;
  // What waited for the read says it did not come, rather than "Loading…" for good; the next load redraws it.
  for (const waiting of section.querySelectorAll('.loading-text')) {
    waiting.classList.replace('loading-text', 'not-loaded');
    waiting.textContent = 'Not loaded.';
  }
  for (const waiting of section.querySelectorAll('tr.placeholder')) {
    waiting.classList.replace('placeholder', 'not-loaded');
    waiting.firstElementChild.textContent = 'Not loaded.';
  }
  box.replaceChildren(
    el('p', { class: 'error-text' }, refused ? 'Your account may not see this page. ' : 'This page could not be loaded. ', error?.message ?? String(error)),
    // replaceChildren, unlike el(), writes a null as the text "null".
    ...(refused ? [el('p', {}, el('a', { href: '#/overview' }, 'Go to the overview'))] : []),
  );
}

export function clearPageProblem(viewId) {
  const section = $(`#view-${viewId}`);
  section.classList.remove('refused');
  const box = $(':scope > .page-problem', section);
  if (box) box.hidden = true;
}

export function result(output, ok, text) {
  output.replaceChildren(el('span', { class: ok ? 'ok' : 'bad' }, text));
}

/** Disables the button while `work` runs. */
export async function busy(button, work) {
  button.disabled = true;
  try {
    return await work();
  } finally {
    button.disabled = false;
  }
}

export function statusBadge(badge, text, kind = '') {
  badge.textContent = text;
  badge.className = `badge ${kind}`;
}

/**
 * A read-only field holding a secret shown once, with a Copy button. The Clipboard API needs a
 * secure context (HTTPS or localhost); on a plain-HTTP LAN address the selected text is copied the
 * old way, or the button says to press Ctrl+C.
 */
export function copyRow(value, label) {
  const input = el('input', { readonly: true, value, 'aria-label': label, spellcheck: 'false', onfocus: (event) => event.target.select() });
  const copy = el('button', { type: 'button' }, 'Copy');
  copy.addEventListener('click', async () => {
    input.select();
    const copied = navigator.clipboard
      ? await navigator.clipboard.writeText(value).then(
          () => true,
          () => false,
        )
      : document.execCommand('copy');
    copy.textContent = copied ? 'Copied' : 'Press Ctrl+C';
  });
  return el('div', { class: 'copy-row' }, input, copy);
}
