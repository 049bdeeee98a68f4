/**
 * Why the database could not write, when the cause is its storage or its server's resources rather
 * than the request: SQLite's SQLITE_FULL (its disk is full) and SQLITE_IOERR_* (the disk failed a
 * read or write), PostgreSQL's class 53 "insufficient resources" (53100 disk_full). Null for any
 * other error. Such a failure passes once space is freed, so the HTTP edge answers it 503 with
 * Retry-After, and readiness reports it.
 */
export type StorageFailure = 'disk full' | 'disk I/O error' | 'out of resources';

export function storageFailure(error: unknown): StorageFailure | null {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return null;
  if (code === 'SQLITE_FULL' || code === '53100') return 'disk full';
  if (code.startsWith('SQLITE_IOERR')) return 'disk I/O error';
  if (code.startsWith('53') && code.length === 5) return 'out of resources';
  return null;
}

/** Errors that mean a backing service is briefly away (database restarting, lock timeout): 503, not 500. */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  // query_canceled: a statement past DATABASE_TIMEOUT_MS (statement_timeout), or cancelled by an operator.
  '57014',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
  'SQLITE_BUSY',
]);

export function isUnavailable(error: { code?: unknown; message?: string }): boolean {
  return (
    UNAVAILABLE_CODES.has(String(error.code)) ||
    /Connection terminated|connection timeout|timeout exceeded when trying to connect|is not queryable|Query read timeout/i.test(error.message ?? '')
  );
}

/**
 * A write a read makes on its way (a token's or a session's last-use time): skipped when the
 * database cannot write for lack of storage, so reads keep working on a full disk. Any other
 * failure is the request's.
 */
export async function unlessStorageFails(write: Promise<unknown>): Promise<void> {
  try {
    await write;
  } catch (error) {
    if (!storageFailure(error)) throw error;
  }
}

/**
 * How long a storage failure keeps readiness false without another write failing. With no writes
 * coming (a load balancer that took the instance out on the first failure sends none), nothing
 * else could ever clear it; after this time the next write tells again.
 */
const REMEMBERED_MS = 10_000;

/** The outcome of the latest writes: a storage failure, until a write succeeds again. */
export class WriteHealth {
  private failure: { reason: StorageFailure; at: number } | null = null;

  /**
   * A write committed (`error` undefined) or failed; only storage failures count. A commit clears a
   * failure only when it `wrote`: one that changed nothing (a background task finding no work) needed
   * no disk, and on a full disk still commits.
   */
  observe(error?: unknown, wrote = true): void {
    if (error === undefined) {
      if (wrote) this.failure = null;
      return;
    }
    const reason = storageFailure(error);
    if (reason) this.failure = { reason, at: Date.now() };
  }

  /** "ok", or why the latest write failed while none has succeeded since (for REMEMBERED_MS). */
  state(now = Date.now()): 'ok' | StorageFailure {
    return this.failure && now - this.failure.at < REMEMBERED_MS ? this.failure.reason : 'ok';
  }
}
