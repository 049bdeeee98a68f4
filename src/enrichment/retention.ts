import type { Database } from '../db/index.js';
import { PRUNE_CHUNK } from '../db/index.js';
import { windowStart } from './quota.js';

/**
 * Retention (docs/enrichment.md): deletes the enrichments finished before `cutoff`, each match with
 * its job, and the matches over (completed or cancelled) that were never requested, created before
 * it; returns the rows deleted. A job the quota still counts (enqueued inside the 24 h window) is
 * kept whatever its finish time, and an unfinished one whatever its age. A match goes with its job,
 * so idempotency stays whole: a request for it is a 404, never a second job for a match that has one.
 */
export async function pruneEnrichments(database: Database, cutoff: string, nowMs = Date.now()): Promise<number> {
  let total = 0;
  for (const state of ['completed', 'failed'] as const) {
    for (let deleted = PRUNE_CHUNK; deleted === PRUNE_CHUNK;) {
      const chunk = await pruneFinishedChunk(database, state, cutoff, windowStart(nowMs));
      deleted = chunk.jobs;
      total += chunk.jobs + chunk.matches;
    }
  }
  for (let deleted = PRUNE_CHUNK; deleted === PRUNE_CHUNK;) {
    deleted = await pruneNeverRequestedChunk(database, cutoff);
    total += deleted;
  }
  return total;
}

/** At most PRUNE_CHUNK jobs in `state` finished before `cutoff` and enqueued outside the quota window, with their matches. */
function pruneFinishedChunk(database: Database, state: 'completed' | 'failed', cutoff: string, outsideWindow: string) {
  return database.transaction(async (trx) => {
    const jobs = await trx
      .selectFrom('enrichment_jobs')
      .select(['id', 'match_id'])
      .where('state', '=', state)
      .where('finished_at', '<', cutoff)
      .where('enqueued_at', '<=', outsideWindow)
      .orderBy('id')
      .limit(PRUNE_CHUNK)
      .execute();
    if (!jobs.length) return { jobs: 0, matches: 0 };
    // The matches first: their row locks make a request for one wait (PostgreSQL), then find it gone.
    const matches = await trx
      .deleteFrom('matches')
      .where(
        'id',
        'in',
        jobs.map((job) => job.match_id),
      )
      .executeTakeFirst();
    await trx
      .deleteFrom('enrichment_jobs')
      .where(
        'id',
        'in',
        jobs.map((job) => job.id),
      )
      .execute();
    return { jobs: jobs.length, matches: Number(matches.numDeletedRows) };
  });
}

/** At most PRUNE_CHUNK matches over (completed or cancelled), never requested, created before `cutoff`. */
async function pruneNeverRequestedChunk(database: Database, cutoff: string): Promise<number> {
  const result = await database.write((db) =>
    db
      .deleteFrom('matches')
      .where('id', 'in', (eb) =>
        eb
          .selectFrom('matches')
          .select('id')
          .where('enrichment_requested_at', 'is', null)
          .where('status', 'in', ['completed', 'cancelled'])
          .where('created_at', '<', cutoff)
          .limit(PRUNE_CHUNK),
      )
      // Again on the row itself: on PostgreSQL a request that claimed the match meanwhile keeps it.
      .where('enrichment_requested_at', 'is', null)
      .executeTakeFirst(),
  );
  return Number(result.numDeletedRows);
}
