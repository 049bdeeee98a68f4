import type { Database } from '../db/index.js';
import { matchNotFound } from './errors.js';
import type { JobState, WaitEstimate } from './estimate.js';

export interface EnrichmentStatus {
  status: JobState | null;
  estimated_wait_seconds: number;
  commentary: string | null;
  error: string | null;
}

/**
 * A match's enrichment. `bot`: the bot asking, which sees only matches it requested: any other
 * match, requested by another bot or by none, answers as if it did not exist (no commentary of
 * others, no probing which match ids exist).
 */
export async function enrichmentStatus(database: Database, estimate: WaitEstimate, matchId: string, bot?: string): Promise<EnrichmentStatus> {
  // One statement, so the job's state and the match's outcome come from the same snapshot: read
  // apart, a job could already be `failed` while its match did not yet show the error.
  const match = await database.db
    .selectFrom('matches')
    .leftJoin('enrichment_jobs', 'enrichment_jobs.match_id', 'matches.id')
    .select(['matches.commentary', 'matches.enrichment_error', 'enrichment_jobs.id as job_id', 'enrichment_jobs.state', 'enrichment_jobs.bot_id'])
    .where('matches.id', '=', matchId)
    .executeTakeFirst();
  if (!match || (bot !== undefined && match.bot_id !== bot)) throw matchNotFound(matchId);
  if (match.job_id === null || match.state === null) return { status: null, estimated_wait_seconds: 0, commentary: null, error: null };
  return {
    status: match.state,
    estimated_wait_seconds: await estimate.seconds(database.db, Number(match.job_id), match.state),
    commentary: match.commentary,
    error: match.enrichment_error,
  };
}
