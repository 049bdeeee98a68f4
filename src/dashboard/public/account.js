// Who is signed in, and the sign-in form: a user name and password, or the admin token (set-up and
// recovery). The role decides which pages are offered; the server decides what is allowed.
import { $, $$ } from './dom.js';

let me = null;
const MODE_KEY = 'mothership.signin';

/** Shows the sign-in fields of `mode` ('user' or 'token'), the last one used on this device by default. */
export function signInMode(mode = localStorage.getItem(MODE_KEY) ?? 'user') {
  const form = $('#signin-form');
  const token = mode === 'token';
  $('.signin-user', form).hidden = token;
  $('.signin-token', form).hidden = !token;
  $('#signin-mode').textContent = token ? 'Sign in with a user name and password' : 'Sign in with the admin token';
  form.dataset.mode = mode;
  (token ? form.token : form.username).focus();
}
$('#signin-mode').addEventListener('click', () => signInMode($('#signin-form').dataset.mode === 'token' ? 'user' : 'token'));

/** The body of POST /api/session for what the form shows. */
export function signInPayload(form) {
  const remember = form.remember.checked;
  localStorage.setItem(MODE_KEY, form.dataset.mode);
  if (form.dataset.mode === 'token') return { token: form.token.value, remember };
  return { username: form.username.value.trim().toLowerCase(), password: form.password.value, remember };
}

/** Says why a sign-in failed, next to the field it concerns. */
export function signInRefusal(form, error) {
  const token = form.dataset.mode === 'token';
  const slot = $(`[data-error-for="${token ? '/token' : '/password'}"]`, form);
  if (error.status === 401) slot.textContent = token ? 'That token is not right.' : 'That user name and password do not match.';
  else if (error.status === 429) slot.textContent = 'Too many attempts: wait a minute and try again.';
  else if (error.problem?.errors?.length) {
    for (const entry of error.problem.errors) {
      const field = $(`[data-error-for="${CSS.escape(entry.path)}"]`, form);
      if (field) field.textContent = entry.path === '/username' ? 'Enter your user name.' : entry.path === '/password' ? 'Enter your password.' : entry.message;
    }
  } else slot.textContent = error.message;
}

/** Applies GET /api/session: a household account sees only its pages, and "Devices" for its own sessions. */
export function applyRole(session) {
  me = session;
  const household = isHousehold();
  for (const element of $$('[data-admin]')) element.hidden = household;
  $('#nav-users').textContent = household ? 'Devices' : 'Users';
  $('#signout').title = session.user ? `Signed in as ${session.name} (${session.user}, ${session.role})` : 'Signed in with the admin token';
}

export const isHousehold = () => me?.role === 'household';
export const currentUser = () => me;
