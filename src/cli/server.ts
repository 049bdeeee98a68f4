/** How a command talks to a running server: its URL (`--server` or MOTHERSHIP_SERVER) and a token (MOTHERSHIP_TOKEN). */

const SERVER_TIMEOUT_MS = 30_000;

/** A mistake in how the command was called: its message says what to type instead. */
export class UsageError extends Error {}
/**
 * The server could not be reached or its answer was lost (no `status`; `sent`: the request may have
 * reached it), or it refused the request (its status and problem+json): the message says why.
 */
export class ServerError extends Error {
  constructor(
    message: string,
    readonly status?: number,
    readonly problem?: { title?: string; detail?: string; errors?: { path: string; message: string }[] },
    readonly sent = false,
  ) {
    super(message);
  }
}

/** Failures of a connection that was made: the request may have reached the server (anything else left no byte of it). */
const AFTER_CONNECTING = /^(?:UND_ERR_SOCKET|UND_ERR_CLOSED|UND_ERR_HEADERS_TIMEOUT|UND_ERR_BODY_TIMEOUT|ECONNRESET|EPIPE)$/;

/** The server a command talks to: `--server`, else MOTHERSHIP_SERVER; undefined for neither. Throws a UsageError for a URL that is not http(s). */
export function serverUrl(option: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  const server = option ?? (env.MOTHERSHIP_SERVER || undefined);
  if (server === undefined) return undefined;
  if (!/^https?:\/\/[^/]/.test(server))
    throw new UsageError(`${option === undefined ? 'MOTHERSHIP_SERVER' : '--server'} must be an http:// or https:// URL, got "${server}"`);
  return server.replace(/\/+$/, '');
}

/**
 * One call to the server with the token from MOTHERSHIP_TOKEN (`needs` says which token, for the
 * message when it is missing); answers the parsed JSON (undefined for 204). Any failure is a
 * ServerError naming why.
 */
export async function serverRequest<T>(url: string, env: NodeJS.ProcessEnv, init: { method: string; body?: string; needs: string }): Promise<T> {
  const token = env.MOTHERSHIP_TOKEN?.trim();
  if (!token) throw new UsageError(`MOTHERSHIP_TOKEN is not set: it carries the token the server accepts (${init.needs})`);
  let response: Response;
  try {
    response = await fetch(url, {
      method: init.method,
      body: init.body,
      headers: { authorization: `Bearer ${token}`, ...(init.body ? { 'content-type': 'application/json' } : {}) },
      signal: AbortSignal.timeout(SERVER_TIMEOUT_MS),
    });
  } catch (error) {
    const cause = (error as Error & { cause?: { code?: string; message?: string } }).cause;
    // Our own timeout may also end a request the server is still working on.
    const sent = AFTER_CONNECTING.test(cause?.code ?? '') || (error as Error).name === 'TimeoutError';
    const why = cause?.code ?? cause?.message ?? (error as Error).message;
    throw new ServerError(
      sent ? `no answer from ${new URL(url).origin}: ${why}` : `could not reach ${new URL(url).origin}: ${why}`,
      undefined,
      undefined,
      sent,
    );
  }
  if (response.status === 204) return undefined as T;
  let text: string;
  try {
    text = await response.text();
  } catch (error) {
    // A refusal recorded nothing; a success did, and only its answer was lost.
    const message = `${new URL(url).origin} answered ${response.status}, then its answer broke off: ${(error as Error).message}`;
    throw new ServerError(message, response.ok ? undefined : response.status, undefined, response.ok);
  }
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new ServerError(`${new URL(url).origin} answered ${response.status} with no JSON: is the server URL the Mothership URL?`, response.status);
  }
  if (!response.ok) {
    const problem = body as { title?: string; detail?: string; errors?: { path: string; message: string }[] };
    const fields = (problem.errors ?? []).map((error) => `\n  ${error.path}: ${error.message}`).join('');
    throw new ServerError(`the server refused the request (${response.status}): ${problem.detail ?? text}${fields}`, response.status, problem);
  }
  return body as T;
}
