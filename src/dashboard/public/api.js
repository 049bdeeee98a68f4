// The one way the dashboard talks to the API: JSON in and out, problems as ApiError, a 401 signs out.
import { clearPageProblem, pageProblem } from './dom.js';

export class ApiError extends Error {
  constructor(status, problem) {
    super(problem?.detail || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

let onUnauthorized = () => {};
/** What to do when the session has ended (the app shows the sign-in form). */
export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

let onForbidden = () => {};
/** What to do when a request is refused with 403: the account's role may have changed since the page was loaded. */
export function whenForbidden(callback) {
  onForbidden = callback;
}

let inFlight = 0;
/** The page shows a progress bar while any request is in flight. */
function track(delta) {
  inFlight += delta;
  document.documentElement.classList.toggle('loading', inFlight > 0);
}

export async function api(method, path, body) {
  return (await request(method, path, body)).data;
}

/** Every item of a paged list (GET, an array per page): follows each page's `Link: <...>; rel="next"`. */
export async function apiAll(path) {
  const items = [];
  for (let next = path; next;) {
    const { data, response } = await request('GET', next);
    items.push(...data);
    next = /<([^>]+)>;\s*rel="next"/.exec(response.headers.get('link') ?? '')?.[1];
  }
  return items;
}

// A page load reads several lists (six pages of persons at 5,000): a few quick reloads can spend the
// address's rate-limit bucket, and a read refused then would leave its card "Loading..." for good.
const READ_RETRIES = 3;
const RETRY_AFTER_MAX_S = 10;

async function request(method, path, body) {
  track(+1);
  try {
    // No CSRF token: the server refuses a cookie-authenticated request that is not same-origin (http/auth.ts).
    const send = () =>
      fetch(path, {
        method,
        credentials: 'same-origin',
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    let response = await send();
    // Only a read is sent again: a refused write is reported, never repeated behind the user's back.
    for (let retry = 0; response.status === 429 && method === 'GET' && retry < READ_RETRIES; retry++) {
      const seconds = Math.min(Number(response.headers.get('retry-after')) || 1, RETRY_AFTER_MAX_S);
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
      response = await send();
    }
    const text = await response.text();
    const data = text ? JSON.parse(text) : null;
    // A refused sign-in is answered in its form; any other 401 means the session has ended.
    if (response.status === 401 && !(method === 'POST' && path === '/api/session')) onUnauthorized();
    if (response.status === 403) onForbidden();
    if (!response.ok) throw new ApiError(response.status, data);
    return { data, response };
  } finally {
    track(-1);
  }
}

/** Logs what went wrong, except a 401 (the sign-in form is already showing). */
export function report(error) {
  if (!(error instanceof ApiError && error.status === 401)) console.error(error);
}

/**
 * A page's load: what it reads, then the page as loaded, or why it could not be at the page's top
 * (a re-read that fails later says so too; one that succeeds takes the message away).
 */
export function loadView(viewId, load) {
  return load().then(
    () => clearPageProblem(viewId),
    (error) => {
      report(error);
      pageProblem(viewId, error);
    },
  );
}
