import http from 'node:http';
import https from 'node:https';
import { describeTlsError, ForbiddenTargetError, guardedLookup, webhookTargetError } from '../outbound.js';
import { parseRetryAfter, type AttemptResult } from './policy.js';

/** How a delivery's error begins when the target policy refused it before any connection. */
export const REFUSED_BY_POLICY = 'not sent';

export interface PostResult extends AttemptResult {
  durationMs: number;
}

/**
 * POSTs a body; never throws: a refused target, timeout or socket error comes back as `error`.
 * `detailed` false (a URL that is not the saved one) folds socket-level reasons into one, so a test
 * cannot tell a closed port from a filtered one.
 */
export function postJson(
  url: string,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
  detailed = true,
  signal?: AbortSignal,
): Promise<PostResult> {
  const started = performance.now();
  const done = (statusCode: number | null, error: string | null, retryAfterMs: number | null = null): PostResult => ({
    statusCode,
    error,
    retryAfterMs,
    durationMs: Math.round(performance.now() - started),
  });
  return new Promise((resolve) => {
    // The policy the URL was saved under, again: a URL stored before it changed is not sent to.
    const refusal = webhookTargetError(url);
    if (refusal) return resolve(done(null, `${REFUSED_BY_POLICY}: the URL ${refusal}`));
    const target = new URL(url);
    const client = target.protocol === 'https:' ? https : http;
    const request = client.request(
      target,
      { method: 'POST', headers: { ...headers, 'content-length': Buffer.byteLength(body) }, lookup: guardedLookup, timeout: timeoutMs, signal },
      (response) => {
        response.resume(); // the body is not needed; drain it so the socket is freed
        const status = response.statusCode ?? null;
        const retryAfterMs = parseRetryAfter(response.headers['retry-after'], Date.now());
        response.on('end', () => resolve(done(status, status && status >= 400 ? `HTTP ${status}` : null, retryAfterMs)));
        response.on('error', (error) => resolve(done(response.statusCode ?? null, error.message)));
      },
    );
    const timer = setTimeout(() => request.destroy(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    request.on('timeout', () => request.destroy(new Error(`timed out after ${timeoutMs} ms`)));
    request.on('error', (error: NodeJS.ErrnoException) => resolve(done(null, describe(error, detailed))));
    request.on('close', () => clearTimeout(timer));
    request.end(body);
  });
}

function describe(error: NodeJS.ErrnoException, detailed: boolean): string {
  if (error instanceof ForbiddenTargetError) return error.message;
  if (error.code === 'ENOTFOUND') return 'host not found';
  const tls = describeTlsError(error);
  if (tls) return tls;
  if (!detailed) return 'no HTTP server answered at that URL';
  switch (error.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset';
    default:
      return error.message;
  }
}
