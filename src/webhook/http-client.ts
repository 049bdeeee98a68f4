import http from 'node:http';
import https from 'node:https';
import { describeTlsError, ForbiddenTargetError, guardedLookup, webhookTargetError } from '../outbound.js';
import { truncateUtf8, WEBHOOK_LOG_BODY_LIMIT } from '../limits.js';
import { parseRetryAfter, type AttemptResult } from './policy.js';

/** How a delivery's error begins when the target policy refused it before any connection. */
export const REFUSED_BY_POLICY = 'not sent';

export interface PostResult extends AttemptResult {
  durationMs: number;
  /** The start of the receiver's answer (WEBHOOK_LOG_BODY_LIMIT bytes, cut on a character), for the delivery log; null without an answer or when not `detailed`. */
  responseBody: string | null;
}

/**
 * POSTs a body; never throws: a refused target, timeout or socket error comes back as `error`.
 * `detailed` false (a URL that is not the saved one) folds socket-level reasons into one, so a test
 * cannot tell a closed port from a filtered one, nor read another host's answer.
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
  const done = (statusCode: number | null, error: string | null, retryAfterMs: number | null = null, responseBody: string | null = null): PostResult => ({
    statusCode,
    error,
    retryAfterMs,
    durationMs: Math.round(performance.now() - started),
    responseBody,
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
        // The start of the answer is kept for the log; the rest is read and dropped so the socket is freed.
        const kept: Buffer[] = [];
        let keptBytes = 0;
        response.on('data', (chunk: Buffer) => {
          if (!detailed || keptBytes > WEBHOOK_LOG_BODY_LIMIT) return;
          kept.push(chunk.subarray(0, WEBHOOK_LOG_BODY_LIMIT + 4 - keptBytes));
          keptBytes += chunk.length;
        });
        const status = response.statusCode ?? null;
        const retryAfterMs = parseRetryAfter(response.headers['retry-after'], Date.now());
        response.on('end', () => {
          const text = detailed ? truncateUtf8(Buffer.concat(kept).toString('utf8'), WEBHOOK_LOG_BODY_LIMIT) : null;
          resolve(done(status, status && status >= 400 ? `HTTP ${status}` : null, retryAfterMs, text));
        });
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
