import { randomBytes } from 'node:crypto';
import type { Database, Db } from '../db/index.js';
import { now } from '../db/index.js';
import type { MatchesTable } from '../db/index.js';
import { recordExists, recordNotFound, replayRefused } from './errors.js';
import { replayRefusal, type Rule } from './commentary.js';
import { insertWithNewId } from '../db/index.js';

export const MATCH_STATUSES = ['scheduled', 'in_progress', 'completed', 'cancelled'] as const;
export type MatchStatus = (typeof MATCH_STATUSES)[number];

export interface MatchView {
  id: string;
  status: MatchStatus;
  enrichment_requested_at: string | null;
  enrichment: { status: MatchesTable['enrichment_status']; commentary: string | null; error: string | null; completed_at: string | null };
  created_at: string;
}

const toMatchView = (row: MatchesTable): MatchView => ({
  id: row.id,
  status: row.status,
  enrichment_requested_at: row.enrichment_requested_at,
  enrichment: { status: row.enrichment_status, commentary: row.commentary, error: row.enrichment_error, completed_at: row.enrichment_completed_at },
  created_at: row.created_at,
});

/** Matches (admin API): a status and an optional replay document the worker reads. */
export class MatchService {
  constructor(
    private readonly database: Database,
    /** The configured generator's rule for a replay: checked when it is written, not when a bot has paid for a request. */
    private readonly replayRule: Rule,
  ) {}

  private checkReplay(replay: unknown): void {
    if (replay === undefined) return;
    const refusal = replayRefusal(this.replayRule, replay);
    if (refusal) throw replayRefused(refusal.field, refusal.message);
  }

  async create(input: { id?: string; status: MatchStatus; replay?: unknown }): Promise<MatchView> {
    this.checkReplay(input.replay);
    return this.database.transaction(async (trx) => {
      const createdAt = now();
      const newMatch = (id: string): MatchesTable => ({
        id,
        status: input.status,
        replay: input.replay === undefined ? null : JSON.stringify(input.replay),
        enrichment_requested_at: null,
        enrichment_status: null,
        commentary: null,
        enrichment_error: null,
        enrichment_completed_at: null,
        created_at: createdAt,
      });
      const id = await insertWithNewId(trx, 'matches', input.id, async () => `m-${randomBytes(5).toString('hex')}`, newMatch);
      if (id === null) throw recordExists('Match', input.id!);
      return toMatchView(newMatch(id));
    });
  }

  async update(id: string, input: { status?: MatchStatus; replay?: unknown }): Promise<MatchView> {
    this.checkReplay(input.replay);
    return this.database.transaction(async (trx) => {
      await readMatch(trx, id);
      const changes: Partial<MatchesTable> = {};
      if (input.status !== undefined) changes.status = input.status;
      if (input.replay !== undefined) changes.replay = JSON.stringify(input.replay);
      if (Object.keys(changes).length) await trx.updateTable('matches').set(changes).where('id', '=', id).execute();
      return readMatch(trx, id);
    });
  }

  get(id: string): Promise<MatchView> {
    return readMatch(this.database.db, id);
  }

  async list(limit: number): Promise<MatchView[]> {
    return (await newestMatches(this.database.db, limit).execute()).map(toMatchView);
  }
}

/** The `limit` matches created last, newest first. */
export const newestMatches = (db: Db, limit: number) => db.selectFrom('matches').selectAll().orderBy('created_at', 'desc').orderBy('id').limit(limit);

/** Reads through `trx`: the database, or the transaction a write runs in. */
async function readMatch(trx: Db, id: string): Promise<MatchView> {
  const row = await trx.selectFrom('matches').selectAll().where('id', '=', id).executeTakeFirst();
  if (!row) throw recordNotFound('Match', id);
  return toMatchView(row);
}
