/** Reconnect delay before attempt n (1-based): initial, 2x, 4x ... capped. */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number): number {
  if (attempt < 1) return initialMs;
  return Math.min(maxMs, initialMs * 2 ** Math.min(attempt - 1, 30));
}
