/**
 * What happens after a delivery attempt (docs/webhook.md), as pure functions:
 * 2xx delivered; 5xx, 429, timeout or connection failure: one retry after WEBHOOK_RETRY_DELAY_MS, or
 * after the receiver's Retry-After when that is later (capped at RETRY_AFTER_CAP_MS); 410 Gone:
 * failed and the webhook switched off; other 4xx and 3xx (redirects are not followed): failed.
 */
export const MAX_WEBHOOK_ATTEMPTS = 2;
/** A receiver may ask for a later retry, but not park a delivery for days. */
export const RETRY_AFTER_CAP_MS = 60 * 60 * 1000;

export interface AttemptResult {
  statusCode: number | null;
  error: string | null;
  /** The receiver's Retry-After, in ms from when the answer came; null when absent or unreadable. */
  retryAfterMs?: number | null;
}

export type Outcome = 'delivered' | 'retry' | 'failed' | 'gone';

export function outcomeOf(result: AttemptResult, attempt: number): Outcome {
  const status = result.statusCode;
  if (status !== null && status >= 200 && status < 300) return 'delivered';
  if (status === 410) return 'gone';
  const retryable = status === null || status >= 500 || status === 429;
  return retryable && attempt < MAX_WEBHOOK_ATTEMPTS ? 'retry' : 'failed';
}

/** How long to wait before the retry: the configured delay, or the receiver's Retry-After when later (capped). */
export function retryDelayOf(result: AttemptResult, retryDelayMs: number): number {
  return Math.max(retryDelayMs, Math.min(result.retryAfterMs ?? 0, RETRY_AFTER_CAP_MS));
}

/** RFC 9110 section 10.2.3: delay-seconds or an HTTP-date; null for anything else. */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | null {
  if (value === undefined) return null;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  // Date.parse accepts many forms; an HTTP-date always names the weekday and GMT.
  if (Number.isNaN(date) || !/GMT$/.test(text)) return null;
  return Math.max(0, date - nowMs);
}
