/** How often the logs are pruned; also once at start-up. */
export const RETENTION_INTERVAL_MS = 60 * 60 * 1000;

const DAY_MS = 24 * 60 * 60 * 1000;

export interface RetainedLog {
  name: string;
  /** Days to keep; 0 keeps everything. */
  days: number;
  /** Deletes the rows from before `cutoff` (ISO 8601); returns how many. */
  prune: (cutoff: string) => Promise<number>;
}

/** The instant before which a log's rows have expired, or null when it keeps everything. */
export const retentionCutoff = (nowMs: number, days: number): string | null => (days > 0 ? new Date(nowMs - days * DAY_MS).toISOString() : null);

/** One retention pass over `logs`: rows deleted per log (logs that keep everything are left out). */
export async function applyRetention(logs: RetainedLog[], nowMs = Date.now()): Promise<Record<string, number>> {
  const deleted: Record<string, number> = {};
  for (const log of logs) {
    const cutoff = retentionCutoff(nowMs, log.days);
    if (cutoff) deleted[log.name] = await log.prune(cutoff);
  }
  return deleted;
}
