import type { ExpressionBuilder } from 'kysely';
import type { Db } from '../db/index.js';
import type { EnrichmentJobsTable, Schema } from '../db/index.js';
import { memo } from '../memo.js';

export type JobState = EnrichmentJobsTable['state'];

/** Estimate used until jobs have finished: what the built-in generator takes, rounded up generously. */
export const PRIOR_JOB_SECONDS = 5;
/** A worker stopped cleanly retires at once; one that died counts as live for three heartbeats (the estimate only). */
export const WORKER_HEARTBEAT_MS = 30_000;
/** Completed jobs whose mean duration the estimate uses. */
const RECENT_JOBS = 20;
/** The estimate's slow-moving inputs (mean job duration, live workers) are refreshed at most this often. */
const ESTIMATE_INPUTS_MS = 1000;

/** The oldest queued and the oldest running job: where the queue starts. */
export type QueueHead = { queued: number | null; running: number | null };

/**
 * A pending job's place in the queue, itself included: its distance from the oldest pending job.
 * Jobs between the two that finished out of order (a retry waiting for its backoff while later jobs
 * completed) still count, so it can only overestimate, by at most the jobs finished out of order.
 */
export function jobsAhead(jobId: number, oldestQueued: number | null, oldestRunning: number | null): number {
  const heads = [oldestQueued, oldestRunning].filter((id): id is number => id !== null).map(Number);
  return heads.length ? Math.max(1, jobId - Math.min(...heads) + 1) : 1;
}

/** Jobs ahead x mean job duration / live workers, rounded up; at least 1 s while pending. */
export const estimateWaitSeconds = (ahead: number, meanSeconds: number, workers: number): number =>
  Math.max(1, Math.ceil((ahead * meanSeconds) / Math.max(1, workers)));

/** The mean of the durations of finished jobs (ISO start and finish times), or the prior when there is none. */
export function meanJobSeconds(jobs: readonly { started_at: string | null; finished_at: string | null }[]): number {
  const durations = jobs.filter((job) => job.started_at && job.finished_at).map((job) => (Date.parse(job.finished_at!) - Date.parse(job.started_at!)) / 1000);
  return durations.length ? durations.reduce((sum, value) => sum + value, 0) / durations.length : PRIOR_JOB_SECONDS;
}

/**
 * The oldest job in a state: one index lookup. Counting the pending jobs below a job instead would
 * scan the whole queue on every request.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- used inside queries over different tables
export const oldestJob = (eb: ExpressionBuilder<Schema, any>, state: JobState) =>
  eb
    .selectFrom('enrichment_jobs')
    .select((inner) => inner.fn.min('id').as('id'))
    .where('state', '=', state)
    .as(state);

/**
 * How long a job waits: jobs ahead (this one included) x recent mean job duration / live workers.
 * With no finished job yet the mean is PRIOR_JOB_SECONDS; with no live worker the estimate assumes
 * one will start.
 */
export class WaitEstimate {
  private readonly inputs = memo(ESTIMATE_INPUTS_MS, async (trx: Db) => ({
    meanSeconds: meanJobSeconds(
      await trx
        .selectFrom('enrichment_jobs')
        .select(['started_at', 'finished_at'])
        .where('state', '=', 'completed')
        .orderBy('id', 'desc')
        .limit(RECENT_JOBS)
        .execute(),
    ),
    workers: await liveWorkers(trx),
  }));

  /** The wait of job `jobId` in `state`; `head` when the caller read it already. */
  async seconds(trx: Db, jobId: number, state: JobState, head?: QueueHead): Promise<number> {
    if (state === 'completed' || state === 'failed') return 0;
    const { queued, running } = head ?? (await trx.selectNoFrom((eb) => [oldestJob(eb, 'queued'), oldestJob(eb, 'running')]).executeTakeFirstOrThrow());
    const { meanSeconds, workers } = await this.inputs.get(trx);
    return estimateWaitSeconds(jobsAhead(jobId, queued, running), meanSeconds, workers);
  }
}

async function liveWorkers(trx: Db): Promise<number> {
  const since = new Date(Date.now() - 3 * WORKER_HEARTBEAT_MS).toISOString();
  const row = await trx
    .selectFrom('workers')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('heartbeat_at', '>=', since)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}
