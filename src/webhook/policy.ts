/**
 * What happens after a delivery attempt (CONTRACT section 5; seed section 7), as a pure function:
 * 2xx delivered; 5xx, timeout or connection failure: one retry after WEBHOOK_RETRY_DELAY_MS;
 * 4xx and 3xx (redirects are not followed): failed, no retry.
 */
export const MAX_WEBHOOK_ATTEMPTS = 2;

export interface AttemptResult {
  statusCode: number | null;
  error: string | null;
}

export type Outcome = 'delivered' | 'retry' | 'failed';

export function outcomeOf(result: AttemptResult, attempt: number): Outcome {
  if (result.statusCode !== null && result.statusCode >= 200 && result.statusCode < 300) return 'delivered';
  const retryable = result.statusCode === null || result.statusCode >= 500;
  return retryable && attempt < MAX_WEBHOOK_ATTEMPTS ? 'retry' : 'failed';
}
