import type { SelectQueryBuilder, Updateable } from 'kysely';
import type { Database, Db } from '../db/index.js';
import { now } from '../db/index.js';
import type { EnrichmentJobsTable, Schema } from '../db/index.js';
import type { EventLog } from '../events/index.js';
import type { JobState } from './estimate.js';

export const MAX_ATTEMPTS = 3;

export type Job = Pick<EnrichmentJobsTable, 'match_id' | 'bot_id' | 'state' | 'attempts' | 'lease_owner'> & { id: number };

/** Backoff before attempt n+1 after attempt n failed: base, then 4 x base. */
export const retryDelayMs = (attempts: number, baseMs: number) => baseMs * 4 ** (attempts - 1);

/**
 * The enrichment job queue, in the database (SQLite or PostgreSQL), as the workers see it, with an
 * explicit state machine:
 *
 *   queued --claim--> running --complete--> completed
 *     ^                 |  \--fail (attempts left)--> queued (run_after = now + backoff)
 *     |                 \--fail (no attempts left)--> failed
 *     \--lease expired (worker died): claimed again, counting an attempt
 *
 * Jobs are enqueued by the enrichment request (request.ts).
 */
export class JobQueue {
  constructor(
    private readonly database: Database,
    private readonly events: EventLog,
    private readonly options: { leaseMs: number; retryBaseMs: number },
  ) {}

  async depth(): Promise<number> {
    const row = await this.database.db
      .selectFrom('enrichment_jobs')
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .where('state', 'in', ['queued', 'running'])
      .executeTakeFirstOrThrow();
    return Number(row.count);
  }

  async heartbeat(workerId: string): Promise<void> {
    const at = now();
    await this.database.write((db) =>
      db
        .insertInto('workers')
        .values({ id: workerId, heartbeat_at: at })
        .onConflict((oc) => oc.column('id').doUpdateSet({ heartbeat_at: at }))
        .execute(),
    );
  }

  async retire(workerId: string): Promise<void> {
    await this.database.write((db) => db.deleteFrom('workers').where('id', '=', workerId).execute());
  }

  /**
   * Claims the oldest runnable job: queued and due, or running with an expired lease (its worker
   * died). PostgreSQL skips rows other workers hold (FOR UPDATE SKIP LOCKED); SQLite's write lock
   * serializes claims. The claim counts an attempt.
   */
  claim(workerId: string): Promise<Job | null> {
    return this.database.transaction(async (trx) => {
      const at = now();
      const oldest = (query: SelectQueryBuilder<Schema, 'enrichment_jobs', { id: number }>) =>
        (this.database.dialect === 'postgres' ? query.forUpdate().skipLocked() : query).orderBy('id').limit(1).executeTakeFirst();
      // Two index walks in id order: as one OR query SQLite gathers and sorts every queued job to find the first.
      const due = await oldest(trx.selectFrom('enrichment_jobs').select('id').where('state', '=', 'queued').where('run_after', '<=', at));
      const abandoned = await oldest(trx.selectFrom('enrichment_jobs').select('id').where('state', '=', 'running').where('lease_expires_at', '<', at));
      const candidate = due && abandoned ? (due.id < abandoned.id ? due : abandoned) : (due ?? abandoned);
      if (!candidate) return null;
      const job = await trx
        .updateTable('enrichment_jobs')
        .set((eb) => ({
          state: 'running',
          lease_owner: workerId,
          lease_expires_at: new Date(Date.now() + this.options.leaseMs).toISOString(),
          attempts: eb('attempts', '+', 1),
          started_at: at,
        }))
        .where('id', '=', candidate.id)
        .returning(['id', 'match_id', 'bot_id', 'state', 'attempts', 'lease_owner'])
        .executeTakeFirstOrThrow();
      await trx.updateTable('matches').set({ enrichment_status: 'running' }).where('id', '=', job.match_id).execute();
      return { ...job, id: Number(job.id) };
    });
  }

  /** When the next job becomes claimable by the clock alone (a retry's run_after, an expired lease), in ms; Infinity when none waits. */
  async nextDue(): Promise<number> {
    const row = await this.database.db
      .selectFrom('enrichment_jobs')
      .select((eb) => [
        eb.fn.min(eb.case().when('state', '=', 'queued').then(eb.ref('run_after')).end()).as('run_after'),
        eb.fn.min(eb.case().when('state', '=', 'running').then(eb.ref('lease_expires_at')).end()).as('lease_expires_at'),
      ])
      .where('state', 'in', ['queued', 'running'])
      .executeTakeFirst();
    const times = [row?.run_after, row?.lease_expires_at].filter((at) => at != null).map((at) => Date.parse(String(at)));
    return Math.min(Infinity, ...times);
  }

  /** Extends the lease of a job this worker still owns; false when it lost the job. */
  renewLease(job: Job, workerId: string): Promise<boolean> {
    return this.updateOwned(this.database.db, job, workerId, { lease_expires_at: new Date(Date.now() + this.options.leaseMs).toISOString() });
  }

  /**
   * Changes a job only while `workerId` still holds its lease; false when another worker took it over
   * (the lease expired), so a worker that lost its job writes nothing.
   */
  private async updateOwned(db: Db, job: Job, workerId: string, changes: Updateable<EnrichmentJobsTable>): Promise<boolean> {
    const result = await db
      .updateTable('enrichment_jobs')
      .set(changes)
      .where('id', '=', job.id)
      .where('lease_owner', '=', workerId)
      .where('state', '=', 'running')
      .executeTakeFirst();
    return Number(result.numUpdatedRows) === 1;
  }

  async readReplay(matchId: string): Promise<unknown> {
    const match = await this.database.db.selectFrom('matches').select('replay').where('id', '=', matchId).executeTakeFirst();
    return match?.replay ? JSON.parse(match.replay) : null;
  }

  /** Finishes a job this worker owns (a worker whose lease was taken over writes nothing). */
  complete(job: Job, workerId: string, commentary: string): Promise<boolean> {
    return this.events.write(async (trx, emit) => {
      const at = now();
      const owned = await this.updateOwned(trx, job, workerId, {
        state: 'completed',
        finished_at: at,
        lease_owner: null,
        lease_expires_at: null,
        last_error: null,
      });
      if (!owned) return false;
      await trx
        .updateTable('matches')
        .set({ enrichment_status: 'completed', commentary, enrichment_error: null, enrichment_completed_at: at })
        .where('id', '=', job.match_id)
        .execute();
      emit('enrichment.completed', { detail: { match_id: job.match_id, bot_id: job.bot_id, job_id: job.id, attempts: job.attempts } });
      return true;
    });
  }

  /** Records a failed attempt: back to the queue with a delay, or failed for good after MAX_ATTEMPTS. */
  fail(job: Job, workerId: string, error: string): Promise<JobState | null> {
    return this.events.write(async (trx, emit) => {
      const final = job.attempts >= MAX_ATTEMPTS;
      const at = now();
      const owned = await this.updateOwned(
        trx,
        job,
        workerId,
        final
          ? { state: 'failed', finished_at: at, lease_owner: null, lease_expires_at: null, last_error: error }
          : {
              state: 'queued',
              run_after: new Date(Date.now() + retryDelayMs(job.attempts, this.options.retryBaseMs)).toISOString(),
              lease_owner: null,
              lease_expires_at: null,
              last_error: error,
            },
      );
      if (!owned) return null;
      await trx
        .updateTable('matches')
        .set(final ? { enrichment_status: 'failed', enrichment_error: error, enrichment_completed_at: at } : { enrichment_status: 'queued' })
        .where('id', '=', job.match_id)
        .execute();
      if (final) {
        emit('enrichment.failed', {
          severity: 'warning',
          detail: { match_id: job.match_id, bot_id: job.bot_id, job_id: job.id, attempts: job.attempts, error },
        });
      }
      return final ? 'failed' : 'queued';
    });
  }
}
