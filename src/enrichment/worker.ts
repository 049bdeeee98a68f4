import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { FastifyBaseLogger } from 'fastify';
import { COMMENTARY_LIMIT, FAILURE_MESSAGE_LIMIT, truncateUtf8 } from '../limits.js';
import type { Metrics } from '../ops/index.js';
import { replayRefusal, type Commentary } from './commentary.js';
import { WORKER_HEARTBEAT_MS } from './estimate.js';
import { MAX_ATTEMPTS, type Job, type JobQueue } from './jobs.js';
import { isUnavailable, PollGate, type CommitMark } from '../db/index.js';
import { pollEvery, untilNextTick, type Poller } from '../ticks.js';

const IDLE_POLL_MS = 1000;

/**
 * The enrichment worker: heartbeats (so the estimate knows how many workers run), claims jobs with a
 * lease, renews the lease while generating, and records the outcome. Runs embedded in the server
 * (WORKER=embedded) or standalone (`mothership worker`); any number may share one database.
 */
export class EnrichmentWorker {
  readonly id = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  private running = false;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private heartbeats: Poller | null = null;
  /** Whether the database was away at the last claim: its warning is written once an outage. */
  private databaseAway = false;
  /** An idle worker claims again only after a commit (a job enqueued by another process) or when a job comes due by the clock. */
  private readonly gate: PollGate;

  constructor(
    database: CommitMark,
    private readonly queue: JobQueue,
    private readonly commentary: Commentary,
    private readonly log: FastifyBaseLogger,
    private readonly metrics: Metrics | null,
    private readonly options: { leaseMs: number },
  ) {
    this.gate = new PollGate(database);
  }

  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    await this.queue.heartbeat(this.id);
    this.heartbeats = pollEvery(WORKER_HEARTBEAT_MS, () =>
      this.queue.heartbeat(this.id).catch((error: Error) => this.log.warn({ err: error }, 'worker heartbeat failed')),
    );
    this.loop = this.run();
  }

  /** Wakes an idle worker at once (a job was just enqueued). */
  notify(): void {
    this.gate.quietUntil(0);
    this.wake?.();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.notify();
    // A heartbeat still in flight must not write the worker back after its retirement.
    await this.heartbeats?.stop();
    await this.loop;
    await this.queue.retire(this.id).catch(() => {});
  }

  private async run(): Promise<void> {
    while (this.running) {
      let job: Job | null = null;
      try {
        if (this.gate.due()) {
          job = await this.queue.claim(this.id);
          this.databaseAway = false;
          if (job) await this.process(job);
          else await this.gate.quietUntilNext(() => this.queue.nextDue());
        }
      } catch (error) {
        this.logFailure(error as Error);
      }
      if (!job && this.running) {
        const { done, wake } = untilNextTick(IDLE_POLL_MS);
        this.wake = wake;
        await done;
      }
      this.wake = null;
    }
  }

  /**
   * A database restarting (an ordinary PostgreSQL restart, a failover) is no fault of the worker's:
   * one warning while it is away, not an error with a stack each second. Anything else is an error.
   */
  private logFailure(error: Error): void {
    if (!isUnavailable(error)) return this.log.error({ err: error }, 'enrichment worker error');
    if (!this.databaseAway) this.log.warn({ reason: error.message }, 'enrichment worker: the database is unavailable; trying again every second');
    this.databaseAway = true;
  }

  async process(job: Job): Promise<void> {
    if (job.attempts > MAX_ATTEMPTS) {
      // Its earlier workers died holding it: it has had all its attempts.
      await this.queue.fail({ ...job, attempts: MAX_ATTEMPTS }, this.id, 'worker lost the job (lease expired) on its last attempt');
      this.metrics?.enrichmentJobs.inc({ outcome: 'failed' });
      return;
    }
    const renew = setInterval(() => void this.queue.renewLease(job, this.id).catch(() => {}), Math.max(50, Math.floor(this.options.leaseMs / 3)));
    try {
      const replay = await this.queue.readReplay(job.match_id);
      const refusal = replayRefusal(this.commentary.rule, replay);
      if (refusal) throw refusal;
      // Both generators echo replay text: the stored commentary is bounded whichever wrote it.
      const commentary = truncateUtf8(await this.commentary.generate(replay, job.match_id), COMMENTARY_LIMIT);
      if (await this.queue.complete(job, this.id, commentary)) this.metrics?.enrichmentJobs.inc({ outcome: 'completed' });
    } catch (error) {
      // The message may quote the replay; it is stored and sent in enrichment.failed.
      const message = truncateUtf8((error as Error).message || String(error), FAILURE_MESSAGE_LIMIT);
      const state = await this.queue.fail(job, this.id, message);
      this.metrics?.enrichmentJobs.inc({ outcome: state === 'failed' ? 'failed' : 'retried' });
      this.log.warn({ match_id: job.match_id, attempt: job.attempts, error: message }, 'enrichment attempt failed');
    } finally {
      clearInterval(renew);
    }
  }
}
