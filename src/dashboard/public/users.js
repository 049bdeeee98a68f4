// Users (admins only: add, change the role, set a new password, delete) and the signed-in devices
// (everyone: a household user sees their own sessions, an admin every one; each can be ended).
import { api, ApiError } from './api.js';
import { $, ago, busy, clearErrors, dateTime, el, emptyState, row, showErrors, showProblem } from './dom.js';
import { currentUser, isHousehold } from './account.js';

let users = null;
let sessions = null;

const ROLES = { household: 'Overview, People, Nodes, clearing a fall', admin: 'everything' };

export const usersView = {
  id: 'users',
  async show() {
    render();
    await load();
  },
  apply() {},
};

async function load() {
  [users, sessions] = await Promise.all([isHousehold() ? null : api('GET', '/api/users'), api('GET', '/api/sessions')]);
  render();
}

function render() {
  const household = isHousehold();
  $('#sessions-title').textContent = household ? 'Your signed-in devices' : 'Signed-in devices';
  $('#sessions-hint').textContent = household
    ? 'Where you are signed in. End a session you do not recognise, or one on a device you gave away.'
    : 'Every signed-in dashboard, whoever it is. A remembered device stays signed in for 30 days; others end after 12 hours or 2 idle hours.';
  if (users && !household) renderUsers();
  if (sessions) renderSessions();
}

function renderUsers() {
  const body = $('#users tbody');
  body.replaceChildren(
    ...users.map((user) =>
      row({ 'data-user': user.username }, [
        ['User', el('span', {}, user.name, el('small', { class: 'hint' }, ` (${user.username})`))],
        [
          'Role',
          el(
            'select',
            { 'aria-label': `Role of ${user.name}`, title: ROLES[user.role], onchange: (event) => change(user, { role: event.target.value }) },
            ...Object.keys(ROLES).map((role) => el('option', { value: role, selected: role === user.role }, role)),
          ),
        ],
        ['Created', dateTime(user.created_at)],
        [
          '',
          el(
            'span',
            { class: 'row-actions' },
            el('button', { type: 'button', class: 'link', onclick: () => setPassword(user), 'aria-label': `New password for ${user.name}` }, 'New password'),
            el('button', { type: 'button', class: 'link danger', onclick: () => remove(user), 'aria-label': `Delete ${user.name}` }, 'Delete'),
          ),
        ],
      ]),
    ),
  );
  if (!users.length)
    body.append(emptyState('tr', 'No users yet. Add one for each person: household for the family, admin for whoever looks after the system.', 4));
}

function renderSessions() {
  const body = $('#sessions tbody');
  body.replaceChildren(
    ...sessions.map((session) =>
      row({ 'data-session': session.id, class: session.current ? 'selected' : undefined }, [
        [
          'Device',
          el(
            'span',
            { class: 'device' },
            session.device ?? 'Unknown device',
            session.current ? el('span', { class: 'badge ok' }, 'this device') : null,
            session.remembered ? el('span', { class: 'badge' }, 'remembered') : null,
          ),
        ],
        ['Who', session.user ? `${session.name} (${session.role})` : 'admin token'],
        ['Signed in', dateTime(session.created_at)],
        ['Last used', ago(session.last_seen_at)],
        ['Ends', dateTime(session.expires_at)],
        ['', el('button', { type: 'button', class: 'link danger', onclick: () => revoke(session) }, session.current ? 'Sign out' : 'End')],
      ]),
    ),
  );
  if (!sessions.length) body.append(emptyState('tr', 'No dashboard sessions: API clients use tokens, not sessions.', 6));
}

const isMe = (user) => user.username === currentUser()?.user;

async function change(user, body) {
  // One change of a select would take the admin pages from the person changing it: asked first.
  if (isMe(user) && body.role === 'household') {
    const otherAdmins = users.filter((other) => other.role === 'admin' && other.username !== user.username).length;
    const question = `Make your own account a household account? You lose the admin pages at once${
      otherAdmins ? '' : ', and no admin user is left: only the admin token can make one again'
    }.`;
    if (!confirm(question)) return render(); // the select shows the role in force again
  }
  try {
    const changed = await api('PATCH', `/api/users/${encodeURIComponent(user.username)}`, body);
    // Your own role changed: the page is drawn afresh for it.
    if (isMe(user)) return location.reload();
    users = users.map((known) => (known.username === user.username ? changed : known));
    render();
  } catch (error) {
    alert(error.message);
    await load();
  }
}

/** The user the password dialog is for (a dialog, not prompt(): the password stays hidden and is typed twice). */
let passwordFor = null;

function setPassword(user) {
  passwordFor = user;
  const form = $('#password-form');
  form.reset();
  clearErrors(form);
  $('#password-dialog-hint').textContent = `For ${user.name} (${user.username}). It signs ${user.name} out on every device.`;
  $('#password-dialog').showModal();
}

$('#password-cancel').addEventListener('click', () => $('#password-dialog').close());

$('#password-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  clearErrors(form);
  if (form.password.value !== form.repeat.value)
    return showErrors(form, new ApiError(400, { errors: [{ path: '/repeat', message: 'is not the same as the new password' }] }));
  try {
    await busy($('button[type=submit]', form), () => api('PATCH', `/api/users/${encodeURIComponent(passwordFor.username)}`, { password: form.password.value }));
    $('#password-dialog').close();
    if (passwordFor.username === currentUser()?.user) location.reload();
    else await load();
  } catch (error) {
    const rest = showErrors(form, error);
    if (rest.length) $('[data-error-for="/password"]', form).textContent = rest.join('; ');
  }
});

async function remove(user) {
  const question = isMe(user)
    ? `Delete your own account, ${user.name} (${user.username})? You are signed out at once, on this device and every other, and cannot sign in with it again.`
    : `Delete ${user.name} (${user.username})? They are signed out on every device and cannot sign in again.`;
  if (!confirm(question)) return;
  try {
    await api('DELETE', `/api/users/${encodeURIComponent(user.username)}`);
    if (isMe(user)) return location.reload();
    await load();
  } catch (error) {
    alert(error.message);
  }
}

async function revoke(session) {
  const what = session.current ? 'Sign out on this device?' : `End the session on ${session.device ?? 'this unknown device'}? It has to sign in again.`;
  if (!confirm(what)) return;
  try {
    await api('DELETE', `/api/sessions/${encodeURIComponent(session.id)}`);
    if (session.current) location.reload();
    else await load();
  } catch (error) {
    alert(error.message);
  }
}

$('#signout-everywhere').addEventListener('click', async () => {
  const whose = isHousehold() ? 'every device you are signed in on' : 'every signed-in dashboard, yours included';
  if (!confirm(`Sign out ${whose}?`)) return;
  await api('DELETE', '/api/sessions').catch(() => {});
  location.reload();
});

$('#user-form').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const name = form.name.value.trim();
  const body = { username: form.username.value.trim().toLowerCase(), role: form.role.value, password: form.password.value, ...(name ? { name } : {}) };
  try {
    await busy($('button', form), () => api('POST', '/api/users', body));
    form.reset();
    clearErrors(form);
    await load();
  } catch (error) {
    if (error.status === 409) error.problem = { errors: [{ path: '/username', message: 'is taken: choose another user name' }] };
    showProblem(form, error);
  }
});
