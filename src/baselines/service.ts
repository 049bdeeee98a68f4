import type { Database } from '../db/index.js';
import { now } from '../db/index.js';
import type { EventLog } from '../events/index.js';
import { notFound } from '../http/problem.js';
import { compareBaselines, type ComparisonReport } from './compare.js';
import type { BaselineRecord } from './schema.js';

export interface StoredBaseline {
  id: number;
  recorded_at: string;
  record: BaselineRecord;
}

type Row = { id: number; recorded_at: string; record: string };
const toStored = (row: Row): StoredBaseline => ({ id: Number(row.id), recorded_at: row.recorded_at, record: JSON.parse(row.record) as BaselineRecord });

/** Stores validated baseline records (exactly as sent) and compares them. */
export class BaselineService {
  constructor(
    private readonly database: Database,
    private readonly events: EventLog,
  ) {}

  /** Stores a valid record (its raw JSON text is kept as sent) and compares it with the previous one. */
  record(record: BaselineRecord, rawJson: string, thresholdPct?: number) {
    return this.events.write(async (trx, emit) => {
      const previous = await trx.selectFrom('baselines').select(['id', 'recorded_at', 'record']).orderBy('id', 'desc').limit(1).executeTakeFirst();
      const recordedAt = now();
      const { id } = await trx
        .insertInto('baselines')
        .values({ commit_sha: record.commit_sha, recorded_at: recordedAt, record: rawJson })
        .returning('id')
        .executeTakeFirstOrThrow();
      const comparison = previous ? compareBaselines(toStored(previous).record, record, thresholdPct) : null;
      emit('baseline.recorded', {
        severity: comparison?.regressed ? 'warning' : 'info',
        detail: {
          id: Number(id),
          commit_sha: record.commit_sha,
          subject_geomean: record.subject_geomean,
          grep_1000_mean_ms: record.grep_1000_mean_ms,
          regressed: comparison?.regressed ?? false,
          regressions: comparison?.regressions ?? [],
        },
      });
      return { id: Number(id), recorded_at: recordedAt, record, comparison };
    });
  }

  async list(limit: number, before?: number): Promise<StoredBaseline[]> {
    let query = this.database.db.selectFrom('baselines').select(['id', 'recorded_at', 'record']).orderBy('id', 'desc').limit(limit);
    if (before !== undefined) query = query.where('id', '<', before);
    return (await query.execute()).map(toStored);
  }

  async get(id: number): Promise<StoredBaseline> {
    const row = await this.database.db.selectFrom('baselines').select(['id', 'recorded_at', 'record']).where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound('Baseline', String(id));
    return toStored(row);
  }

  async latest(): Promise<StoredBaseline> {
    const [latest] = await this.list(1);
    if (!latest) throw notFound('Baseline', 'latest');
    return latest;
  }

  /**
   * Resolves `latest`, a record id, or a commit sha (the newest record of that commit). Up to 6 digits
   * is an id; 7 or more characters is a commit sha first (an all-digit sha is possible), then an id.
   */
  async resolve(reference: string): Promise<StoredBaseline> {
    if (reference === 'latest') return this.latest();
    if (/^\d{1,6}$/.test(reference)) return this.get(Number(reference));
    const row = await this.database.db
      .selectFrom('baselines')
      .select(['id', 'recorded_at', 'record'])
      .where('commit_sha', '=', reference)
      .orderBy('id', 'desc')
      .limit(1)
      .executeTakeFirst();
    if (row) return toStored(row);
    if (/^\d+$/.test(reference) && Number.isSafeInteger(Number(reference))) return this.get(Number(reference));
    throw notFound('Baseline', reference);
  }

  async compare(baseRef: string, headRef: string, thresholdPct?: number): Promise<ComparisonReport & { base_id: number; head_id: number }> {
    const [base, head] = await Promise.all([this.resolve(baseRef), this.resolve(headRef)]);
    return { base_id: base.id, head_id: head.id, ...compareBaselines(base.record, head.record, thresholdPct) };
  }
}
