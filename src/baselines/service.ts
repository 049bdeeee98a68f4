import type { Database, Db } from '../db/index.js';
import { setImmediate } from 'node:timers/promises';
import { sql } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { FastifyBaseLogger } from 'fastify';
import { BASELINE_PUSH_LOCK, baselineRowBytesSql, now, prepare, prepareColumn, type Prepared, type PreparedColumn } from '../db/index.js';
import type { EventLog } from '../events/index.js';
import { invalidFields, notFound } from '../errors.js';
import { compareBaselines, DEFAULT_THRESHOLD_PCT, type ComparisonReport } from './compare.js';
import { DEFAULT_DETECTION, detectRegression, type Detection } from './detect.js';
import { futureError, runAt, withoutByteOrderMark, type BaselineRecord } from './schema.js';

export interface StoredBaseline {
  id: number;
  recorded_at: string;
  record: BaselineRecord;
}

type Row = { id: number; recorded_at: string; record: string };
/** A stored record (one a build before this stored with a byte order mark too). */
const parseRecord = (text: string) => JSON.parse(withoutByteOrderMark(text)) as BaselineRecord;
const toStored = (row: Row): StoredBaseline => ({ id: row.id, recorded_at: row.recorded_at, record: parseRecord(row.record) });

const COLUMNS = ['id', 'recorded_at', 'record'] as const;
/** Runs read before a head at least (a commit may have several runs). */
const HISTORY_RUNS = 100;
/** The most runs a history reaches back, past a commit re-run many times, to find its `lookback` earlier commits. */
const MAX_HISTORY_RUNS = 1_000;
/**
 * Parsed records kept: several times what one request reads (a page of 500 and up to
 * HISTORY_RUNS + MAX_HISTORY_RUNS runs behind it), so that no request evicts its own history, and
 * at most PARSED_BYTES of them as JSON. Parsing a record's padding is the cost the cache saves, and
 * padding is gone once parsed; its notes and URL stay, hence the bound in bytes.
 */
const PARSED_RECORDS = 10_000;
const PARSED_BYTES = 16 * 2 ** 20;
/** Records read per statement when they are not parsed yet (records). */
const RECORDS_READ = 32;
/** Verdicts between two turns of the event loop in a page with detection. */
const DETECTIONS_PER_TURN = 50;
/** Runs read per statement when deleting the earliest to stay within BASELINE_STORAGE_MB. */
const STORAGE_CHUNK = 100;

/**
 * Where the history of the run at `index` of `runs` (oldest first) starts: the HISTORY_RUNS runs
 * before it, and further back to the runs of other commits while those hold fewer than `lookback`
 * commits other than its own (a commit re-run every night would crowd them out), at most
 * MAX_HISTORY_RUNS runs back. `short`: the look reached the first of `runs` and wants older ones.
 */
function historyStart(runs: Pick<StoredBaseline, 'record'>[], index: number): { start: number; short: boolean } {
  const own = commitOf(runs[index]!.record);
  const others = new Set<string>();
  const base = Math.max(0, index - HISTORY_RUNS);
  let start = base;
  let reached = index;
  // Past the base window, no further than its `lookback`-th other commit, however many runs were read:
  // a verdict must not depend on the page that asked for it.
  while (reached > 0 && index - reached < MAX_HISTORY_RUNS && !(reached <= base && others.size >= DEFAULT_DETECTION.lookback)) {
    const commit = commitOf(runs[reached - 1]!.record);
    reached--;
    if (commit === own) continue;
    others.add(commit);
    // Past the base window, only as far as another commit's run: the head's own runs beyond it add nothing.
    start = Math.min(start, reached);
  }
  const wanted = index < HISTORY_RUNS || others.size < DEFAULT_DETECTION.lookback;
  return { start, short: reached === 0 && index < MAX_HISTORY_RUNS && wanted };
}

/** The detection of the run at `index` of `runs` (oldest first) against the runs before it. */
function detectAt(runs: Pick<StoredBaseline, 'record'>[], index: number, thresholdPct: number): Detection {
  const head = runs[index]!;
  const before = runs.slice(historyStart(runs, index).start, index).map(toRun);
  const headRuns = [...before.filter((run) => run.commit_sha === commitOf(head.record)), toRun(head)];
  return detectRegression(before, headRuns, { ...DEFAULT_DETECTION, thresholdPct });
}
const toRun = (stored: Pick<StoredBaseline, 'record'>) => ({ commit_sha: commitOf(stored.record), record: stored.record });
/** A commit's sha in either case is one commit (docs/baselines.md): stored and compared in lower case. */
const commitOf = (record: Pick<BaselineRecord, 'commit_sha'>) => record.commit_sha.toLowerCase();
/** The column's commit as lookups compare it (`commitOf`), served by migration 032's index; the column holds the sha as sent. */
const commitKey = sql<string>`lower(commit_sha)`;

/**
 * Stores validated baseline records (exactly as sent) and compares them. Runs are in run order: by
 * the record's `timestamp` (`run_at`), then by id; never by when they were posted.
 */
export class BaselineService {
  /**
   * Records parsed before, by id. A stored record never changes (it is kept exactly as sent and no
   * code updates one) and ids are never reused (a deleted record's id is never read again), so this
   * needs no invalidation, whichever instance wrote it: a push
   * then reads only the ids of its history instead of parsing every earlier run's JSON again.
   */
  private readonly parsed = new LRUCache<number, BaselineRecord>({
    max: PARSED_RECORDS,
    maxSize: PARSED_BYTES,
    sizeCalculation: (record) => JSON.stringify(record).length,
  });
  /**
   * Records inserted by a transaction still open, by its handle: until it commits, only it can see
   * their rows, and a rollback may give their ids to other records.
   */
  private readonly uncommitted = new WeakMap<Db, Map<number, BaselineRecord>>();
  /** Compiled once (db/prepared.ts): these run on every push. */
  private readonly historyIds: PreparedColumn<number, 'at'>;
  private readonly insert: Prepared<{ id: number }, 'commitSha' | 'recordedAt' | 'runAt' | 'record'>;
  /** The baseline rows' bytes (migration 030's count): read on every push. */
  private readonly usage: Prepared<{ bytes: number | string }>;
  /** The two sides of "another commit": it runs on every push whose history has fewer than `lookback` other commits. */
  private readonly otherCommitsBefore: Prepared<{ id: number }, 'commit' | 'id'>[];

  constructor(
    private readonly database: Database,
    private readonly events: EventLog,
    /** BASELINE_STORAGE_MB in bytes (0: no bound), and where a deletion of old records is told. */
    private readonly storage: { limitBytes: number; log: Pick<FastifyBaseLogger, 'info'> } = { limitBytes: 0, log: { info() {} } },
  ) {
    // Index-only (baselines_run_order holds run_at and id).
    this.historyIds = prepareColumn(database, ['at'], (db, param) =>
      db.selectFrom('baselines').select('id').where('run_at', '<=', param('at')).orderBy('run_at', 'desc').orderBy('id', 'desc').limit(HISTORY_RUNS),
    );
    this.otherCommitsBefore = (['<', '>'] as const).map((side) =>
      prepare(database, ['commit', 'id'], (db, param) =>
        db
          .selectFrom('baselines')
          .select('id')
          .where(commitKey, side, param('commit'))
          .where('run_at', '<=', db.selectFrom('baselines').select('run_at').where('id', '=', param('id')))
          .limit(1),
      ),
    );
    this.usage = prepare(database, [], (db) => db.selectFrom('baseline_usage').select('bytes').where('id', '=', 1));
    this.insert = prepare(database, ['commitSha', 'recordedAt', 'runAt', 'record'], (db, param) =>
      db
        .insertInto('baselines')
        .values({ commit_sha: param('commitSha'), recorded_at: param('recordedAt'), run_at: param('runAt'), record: param('record') })
        .returning('id'),
    );
  }

  /**
   * Stores a valid record (its raw JSON text is kept as sent) and compares it with the run before it
   * in run order: for a backfilled older run, the run that preceded it then, not the newest.
   */
  async record(record: BaselineRecord, rawJson: string, thresholdPct = DEFAULT_THRESHOLD_PCT) {
    const future = futureError(record, Date.now());
    if (future.length) throw invalidFields(future);
    const result = await this.events.write(async (trx, emit) => {
      // One push at a time from its history's read to its commit, so concurrent pushes (CI jobs, instances)
      // see each other; SQLite's one writer does this already.
      if (this.database.dialect === 'postgres') await sql`select pg_advisory_xact_lock(${BASELINE_PUSH_LOCK})`.execute(trx);
      const at = runAt(record.timestamp);
      const ids = await this.historyIds.execute(trx, { at });
      const read = [...(await this.records(trx, ids)).reverse(), { id: 0, record }];
      const history = (await this.withHistory(read, read.length - 1, ids.length < HISTORY_RUNS, trx)).runs.slice(0, -1);
      const recordedAt = now();
      const [row] = (await this.insert.execute(trx, { commitSha: record.commit_sha, recordedAt, runAt: at, record: rawJson })).rows;
      const id = row!.id;
      this.uncommittedIn(trx).set(id, record);
      const deletedThrough = await this.keepWithinStorage(trx, id);
      const earlier = history.filter((run) => run.id > deletedThrough);
      const previous = earlier.at(-1);
      const comparison = previous ? compareBaselines(previous.record, record, thresholdPct) : null;
      const stored = { id, recorded_at: recordedAt, record };
      const detection = detectAt([...earlier, stored], earlier.length, thresholdPct);
      // The alarm is the history-aware verdict: noise on a shared runner must not raise one.
      emit('baseline.recorded', {
        severity: detection.regressed ? 'warning' : 'info',
        detail: {
          id,
          commit_sha: record.commit_sha,
          subject_geomean: record.subject_geomean,
          grep_1000_mean_ms: record.grep_1000_mean_ms,
          regressed: detection.regressed,
          regressions: detection.regressions,
        },
      });
      return { id, recorded_at: recordedAt, record, comparison, detection };
    });
    // Only once committed: a rolled-back insert's id may be given to another record.
    this.remember(result.id, record);
    return result;
  }

  /**
   * Deletes the earliest recorded runs while the rows take more than BASELINE_STORAGE_MB, in the
   * push's transaction (`kept`: the push's own). Records are kept as sent, so one `ci` token could
   * otherwise fill the disk with padded ones; the oldest history goes first, as the logs' budget does,
   * so a CI job is never refused for it. Answers the last id deleted (all up to it but `kept` are gone), or 0.
   */
  private async keepWithinStorage(trx: Db, kept: number): Promise<number> {
    const { limitBytes, log } = this.storage;
    if (limitBytes === 0) return 0;
    let excess = Number((await this.usage.execute(trx, {})).rows[0]!.bytes) - limitBytes;
    let deleted = 0;
    let last = 0;
    while (excess > 0) {
      const oldest = await trx
        .selectFrom('baselines')
        .select(['id', sql<number | string>`${sql.raw(baselineRowBytesSql(this.database.dialect, 'baselines'))}`.as('bytes')])
        .where('id', '<>', kept)
        .orderBy('id')
        .limit(STORAGE_CHUNK)
        .execute();
      if (!oldest.length) break;
      for (const row of oldest) {
        last = row.id;
        deleted++;
        excess -= Number(row.bytes);
        if (excess <= 0) break;
      }
      await trx.deleteFrom('baselines').where('id', '<=', last).where('id', '<>', kept).execute();
    }
    if (deleted) log.info({ deleted, limit_mb: limitBytes / 2 ** 20 }, 'baselines: the earliest runs deleted to stay within BASELINE_STORAGE_MB');
    return last;
  }

  /**
   * Newest run first; `before`: only the runs before that record in run order (the next page). With
   * `detection`, each run carries its history-aware verdict against the runs before it (the chart's
   * noise band and regression marks).
   */
  async list(limit: number, before?: number, detection?: { thresholdPct: number }): Promise<Array<StoredBaseline & { detection?: Detection }>> {
    const runs = await this.page(limit + (detection ? HISTORY_RUNS : 0), before);
    if (!detection) return runs;
    const read = runs.reverse();
    const { runs: oldestFirst, from } = await this.withHistory(read, Math.max(0, read.length - limit), read.length < limit + HISTORY_RUNS);
    const detected: Array<StoredBaseline & { detection: Detection }> = [];
    for (let index = from; index < oldestFirst.length; index++) {
      // Between verdicts, other requests run: a page of 500 takes tens of milliseconds.
      if (index > from && (index - from) % DETECTIONS_PER_TURN === 0) await setImmediate();
      detected.push({ ...oldestFirst[index]!, detection: detectAt(oldestFirst, index, detection.thresholdPct) });
    }
    return detected.reverse();
  }

  /** The history-aware verdict on one run, against the runs before it. */
  async detect(id: number, thresholdPct: number): Promise<Detection> {
    const head = await this.get(id);
    const before = (await this.page(HISTORY_RUNS, id)).reverse();
    const { runs, from } = await this.withHistory([...before, head], before.length, before.length < HISTORY_RUNS);
    return detectAt(runs, from, thresholdPct);
  }

  /**
   * Reads runs older than the first of `runs` (oldest first) while the history of a run from `from`
   * on wants them (historyStart) and they hold a commit other than that run's: older runs all of the
   * one commit that wants them (a team that pushed every run as `main`) add nothing to its history.
   * `exhausted`: the runs read so far were all there are. Answers the runs and where the given ones
   * start now.
   */
  private async withHistory<T extends Pick<StoredBaseline, 'id' | 'record'>>(
    given: T[],
    from: number,
    exhausted: boolean,
    db: Db = this.database.db,
  ): Promise<{ runs: (T | StoredBaseline)[]; from: number }> {
    let runs: (T | StoredBaseline)[] = given;
    let left = !exhausted;
    for (;;) {
      // The commits of the runs that want older ones; two are enough: each is the other's other commit.
      const wanting = new Set<string>();
      for (let index = from; index < runs.length && wanting.size < 2; index++) if (historyStart(runs, index).short) wanting.add(commitOf(runs[index]!.record));
      if (!left || wanting.size === 0) return { runs, from };
      const oldest = runs[0]!;
      if (wanting.size === 1 && !(await this.otherCommitBefore(db, [...wanting][0]!, oldest.id))) return { runs, from };
      const older = (await this.page(HISTORY_RUNS, oldest.id, db)).reverse();
      left = older.length === HISTORY_RUNS;
      runs = [...older, ...runs];
      from += older.length;
    }
  }

  /** Whether a run of a commit other than `commit` comes before run `id` in run order (read in the commit index only). */
  private async otherCommitBefore(db: Db, commit: string, id: number): Promise<boolean> {
    for (const side of this.otherCommitsBefore) if ((await side.execute(db, { commit, id })).rows.length > 0) return true;
    return false;
  }

  /**
   * The stored runs of `ids` (in their order), each parsed once per process: the record column is
   * read only for the ids not parsed before, nor inserted earlier in this transaction. Answered from
   * what was found, not from the cache: remembering the rest may push found ones out of it.
   */
  private async records(db: Db, ids: number[]): Promise<Pick<StoredBaseline, 'id' | 'record'>[]> {
    const uncommitted = this.uncommitted.get(db);
    const found = new Map<number, BaselineRecord>();
    for (const id of ids) {
      const record = this.parsed.get(id) ?? uncommitted?.get(id);
      if (record) found.set(id, record);
    }
    const missing = ids.filter((id) => !found.has(id));
    for (let from = 0; from < missing.length; from += RECORDS_READ) {
      // Between reads, other requests run: SQLite's reads block the process, and records are stored as
      // sent, padding and all.
      if (from > 0) await setImmediate();
      const chunk = missing.slice(from, from + RECORDS_READ);
      for (const row of await db.selectFrom('baselines').select(['id', 'record']).where('id', 'in', chunk).execute()) {
        const record = parseRecord(row.record);
        found.set(row.id, record);
        this.remember(row.id, record);
      }
    }
    // A run deleted since its id was read (BASELINE_STORAGE_MB, another instance's push) is left out.
    return ids.filter((id) => found.has(id)).map((id) => ({ id, record: found.get(id)! }));
  }

  /** The records `trx` inserted: on SQLite, the pushes of one group commit share its transaction. */
  private uncommittedIn(trx: Db): Map<number, BaselineRecord> {
    let records = this.uncommitted.get(trx);
    if (!records) this.uncommitted.set(trx, (records = new Map()));
    return records;
  }

  private remember(id: number, record: BaselineRecord): void {
    this.parsed.set(id, record);
  }

  private async page(limit: number, before?: number, db: Db = this.database.db): Promise<StoredBaseline[]> {
    // The records through the parsed ones (records): a page read again costs its ids, not its JSON.
    let query = db.selectFrom('baselines').select(['id', 'recorded_at']).orderBy('run_at', 'desc').orderBy('id', 'desc').limit(limit);
    if (before !== undefined) {
      const cursor = await db.selectFrom('baselines').select(['run_at', 'id']).where('id', '=', before).executeTakeFirst();
      if (!cursor) throw notFound('Baseline', String(before));
      query = query.where((eb) => eb.or([eb('run_at', '<', cursor.run_at), eb.and([eb('run_at', '=', cursor.run_at), eb('id', '<', cursor.id)])]));
    }
    const rows = await query.execute();
    const recordedAt = new Map(rows.map((row) => [row.id, row.recorded_at]));
    const records = await this.records(
      db,
      rows.map((row) => row.id),
    );
    return records.map(({ id, record }) => ({ id, recorded_at: recordedAt.get(id)!, record }));
  }

  async get(id: number): Promise<StoredBaseline> {
    const row = await this.database.db.selectFrom('baselines').select(COLUMNS).where('id', '=', id).executeTakeFirst();
    if (!row) throw notFound('Baseline', String(id));
    return toStored(row);
  }

  async latest(): Promise<StoredBaseline> {
    const [latest] = await this.list(1);
    if (!latest) throw notFound('Baseline', 'latest');
    return latest;
  }

  /**
   * Resolves `latest`, a record id, or a commit sha (the newest run of that commit). Up to 6 digits
   * is an id; 7 or more characters is a commit sha first (an all-digit sha is possible), then an id.
   */
  async resolve(reference: string): Promise<StoredBaseline> {
    if (reference === 'latest') return this.latest();
    if (/^\d{1,6}$/.test(reference)) return this.get(Number(reference));
    const row = await inRunOrder(this.database.db).where(commitKey, '=', reference.toLowerCase()).limit(1).executeTakeFirst();
    if (row) return toStored(row);
    if (/^\d+$/.test(reference) && Number.isSafeInteger(Number(reference))) return this.get(Number(reference));
    throw notFound('Baseline', reference);
  }

  async compare(baseRef: string, headRef: string, thresholdPct?: number): Promise<ComparisonReport & { base_id: number; head_id: number }> {
    const [base, head] = await Promise.all([this.resolve(baseRef), this.resolve(headRef)]);
    return { base_id: base.id, head_id: head.id, ...compareBaselines(base.record, head.record, thresholdPct) };
  }
}

/** Baselines, newest run first (index baselines_run_order). */
function inRunOrder(db: Db) {
  return db.selectFrom('baselines').select(COLUMNS).orderBy('run_at', 'desc').orderBy('id', 'desc');
}
