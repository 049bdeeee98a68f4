import { DEFAULT_THRESHOLD_PCT, METRICS, round, speedup, type Direction } from './compare.js';
import type { BaselineRecord } from './schema.js';

/**
 * History-aware regression detection (pure). One run against one previous run raises an alarm
 * whenever a shared CI runner is noisy; here a head run is a regression only when it is worse than
 * the recent history's centre by more than the threshold AND outside that history's noise band
 * (a lookback z-score, as Conbench does), so noise alone cannot raise one and a step of the
 * threshold's size still does. Runs of one commit are averaged first (mean, and their spread):
 * re-running a benchmark sharpens the estimate instead of adding a vote.
 */
export interface DetectionOptions {
  /** Earlier commits whose runs form the history. */
  lookback: number;
  thresholdPct: number;
  /** How many standard deviations from the centre the head must be. */
  zThreshold: number;
  /** Below this many earlier commits there is no usable spread: the percentage threshold decides alone. */
  minRuns: number;
}

export const DEFAULT_DETECTION: DetectionOptions = { lookback: 10, thresholdPct: DEFAULT_THRESHOLD_PCT, zThreshold: 3, minRuns: 5 };

export interface Run {
  commit_sha: string;
  record: BaselineRecord;
}

export interface FieldDetection {
  /** A subject metric, or `speedup_vs_<tool>`. */
  field: string;
  direction: Direction;
  /** The head commit's value: the mean of its runs. */
  head: number | null;
  head_runs: number;
  /** Mean and sample standard deviation of the earlier commits' values; null without history. */
  centre: number | null;
  spread: number | null;
  runs_considered: number;
  /** Head against the centre, percent (positive = higher). */
  change_pct: number | null;
  /** Head against the centre in standard deviations (positive = higher); null without a spread. */
  z: number | null;
  /** The noise band: centre ± zThreshold × spread. */
  band: [number, number] | null;
  method: 'z-score' | 'threshold' | 'none';
  regression: boolean;
  /** Why, in one sentence. */
  reason: string;
}

export interface Detection {
  method: 'z-score' | 'threshold' | 'none';
  lookback: number;
  threshold_pct: number;
  z_threshold: number;
  head_commit: string;
  /** Earlier commits in the history (the most any field had). */
  runs_considered: number;
  regressed: boolean;
  regressions: string[];
  fields: FieldDetection[];
  note: string | null;
}

const finite = (value: unknown): value is number => typeof value === 'number' && Number.isFinite(value);
/** Rounded for the answer; null for a figure JSON cannot carry (an overflow of extreme but valid inputs). */
const shown = (value: number) => (Number.isFinite(value) ? round(value) : null);
/**
 * The mean, summed as offsets from the first value: figures that never moved average to that figure
 * exactly, with no spread (a plain sum of nine 94.1s is 94.1 plus rounding, which read as a change).
 * Divided before summing only when the offsets overflow (figures near 1e308); the parts' rounding
 * could still carry it past the largest value.
 */
function mean(values: number[]): number {
  const first = values[0]!;
  const offsets = values.reduce((total, value) => total + (value - first), 0);
  if (Number.isFinite(offsets)) return first + offsets / values.length;
  return Math.min(
    Math.max(...values),
    values.reduce((total, value) => total + value / values.length, 0),
  );
}
/** Sample standard deviation; scaled by the largest deviation only when the squares overflow or vanish. */
function sampleSd(values: number[]): number {
  const centre = mean(values);
  const deviations = values.map((value) => value - centre);
  const scale = Math.max(...deviations.map(Math.abs));
  if (scale === 0) return 0;
  const plain = Math.sqrt(deviations.reduce((sum, deviation) => sum + deviation ** 2, 0) / (values.length - 1));
  if (Number.isFinite(plain) && plain > 0) return plain;
  return scale * Math.sqrt(deviations.reduce((sum, deviation) => sum + (deviation / scale) ** 2, 0) / (values.length - 1));
}

/** What each field reads from a record: the subject's own figures and the within-run speedups. */
const FIELDS: { field: string; direction: Direction; read: (record: BaselineRecord) => number | null }[] = [
  ...METRICS.filter((metric) => metric.role === 'subject').map(({ field, direction }) => ({
    field,
    direction,
    read: (record: BaselineRecord) => (finite(record[field]) ? (record[field] as number) : null),
  })),
  ...(['alpha', 'beta', 'gamma'] as const).map((tool) => ({
    field: `speedup_vs_${tool}`,
    direction: 'higher_is_better' as Direction,
    read: (record: BaselineRecord) => speedup(record, tool),
  })),
];

/** The runs' records grouped by commit, in the order of each commit's last run (oldest first). */
function byCommit(runs: Run[]): BaselineRecord[][] {
  const groups = new Map<string, BaselineRecord[]>();
  for (const run of runs) {
    const records = groups.get(run.commit_sha) ?? [];
    records.push(run.record);
    groups.delete(run.commit_sha); // re-inserted: a commit's place is that of its last run
    groups.set(run.commit_sha, records);
  }
  return [...groups.values()];
}

/**
 * A field's mean over each commit's runs, for the newest `lookback` commits that have it (oldest
 * first): a commit without the field does not count, so the look reaches past it.
 */
function perCommit(commits: BaselineRecord[][], read: (record: BaselineRecord) => number | null, lookback: number): number[] {
  const means: number[] = [];
  for (let index = commits.length - 1; index >= 0 && means.length < lookback; index--) {
    const values = commits[index]!.map(read).filter((value) => value !== null);
    if (values.length) means.push(mean(values));
  }
  return means.reverse();
}

/**
 * Decides whether the head commit (its runs, in run order) regressed against `history` (every run
 * before the head's first one, in run order; runs of the head commit among them are ignored).
 */
export function detectRegression(history: Run[], head: Run[], options: DetectionOptions = DEFAULT_DETECTION): Detection {
  const headCommit = head.at(-1)?.commit_sha ?? '';
  const earlier = byCommit(history.filter((run) => run.commit_sha !== headCommit));
  const fields = FIELDS.map(({ field, direction, read }) =>
    judgeField(field, direction, perCommit(earlier, read, options.lookback), head.map((run) => read(run.record)).filter(finite), options),
  );
  const regressions = fields.filter((entry) => entry.regression).map((entry) => entry.field);
  const considered = Math.max(0, ...fields.map((entry) => entry.runs_considered));
  const method = considered === 0 ? 'none' : considered >= options.minRuns ? 'z-score' : 'threshold';
  const note =
    method === 'none'
      ? 'No earlier runs: nothing to compare with.'
      : method === 'threshold'
        ? `Only ${considered} earlier commit${considered === 1 ? '' : 's'} (fewer than ${options.minRuns}): no noise band yet, the ${options.thresholdPct}% threshold decides alone.`
        : null;
  return {
    method,
    lookback: options.lookback,
    threshold_pct: options.thresholdPct,
    z_threshold: options.zThreshold,
    head_commit: headCommit,
    runs_considered: considered,
    regressed: regressions.length > 0,
    regressions,
    fields,
    note,
  };
}

type Judgement = Omit<FieldDetection, 'field' | 'direction' | 'head' | 'head_runs' | 'runs_considered'>;
// Every verdict is built whole, in one order: an object spread first and extended after (`{ ...base,
// head, ... }`) made V8 build a new hidden class per result, which cost more than the detection.
const verdict = (field: string, direction: Direction, head: number | null, headRuns: number, runsConsidered: number, rest: Judgement): FieldDetection => ({
  field,
  direction,
  head,
  head_runs: headRuns,
  centre: rest.centre,
  spread: rest.spread,
  runs_considered: runsConsidered,
  change_pct: rest.change_pct,
  z: rest.z,
  band: rest.band,
  method: rest.method,
  regression: rest.regression,
  reason: rest.reason,
});

function judgeField(field: string, direction: Direction, window: number[], headValues: number[], options: DetectionOptions): FieldDetection {
  const head = headValues.length ? mean(headValues) : null;
  if (head === null || window.length === 0) {
    return verdict(field, direction, head, headValues.length, window.length, {
      centre: null,
      spread: null,
      change_pct: null,
      z: null,
      band: null,
      method: 'none',
      regression: false,
      reason: head === null ? 'not in the head run' : 'no earlier runs',
    });
  }
  const centre = mean(window);
  const sign = direction === 'lower_is_better' ? 1 : -1; // positive = worse
  // Exact, possibly infinite (1e308 against 1e-320): the verdict uses it, the answer shows null.
  const changePct = centre === 0 ? null : ((head - centre) / centre) * 100;
  const worseBy = changePct === null ? (head === centre ? 0 : sign * (head - centre) > 0 ? Infinity : -Infinity) : sign * changePct;
  // Beyond the threshold by more than floating-point noise.
  const beyondThreshold = worseBy > options.thresholdPct + 1e-9;
  const shownChange = changePct === null ? null : shown(changePct);
  const pctText =
    changePct === null
      ? 'from a centre of 0'
      : `${changePct === 0 ? 'the same as' : `${Number.isFinite(changePct) ? `${Math.abs(round(changePct, 3))}%` : 'beyond any percentage'} ${worseBy > 0 ? 'worse' : 'better'} than`} the mean of ${window.length} earlier commit${window.length === 1 ? '' : 's'}`;

  if (window.length < options.minRuns) {
    return verdict(field, direction, round(head), headValues.length, window.length, {
      centre: round(centre),
      spread: null,
      change_pct: shownChange,
      z: null,
      band: null,
      method: 'threshold',
      regression: beyondThreshold,
      reason: `${pctText}; ${beyondThreshold ? 'beyond' : 'within'} the ${options.thresholdPct}% threshold (too few runs for a noise band)`,
    });
  }
  const spread = sampleSd(window);
  const z = spread > 0 ? (head - centre) / spread : head === centre ? 0 : null;
  const outsideBand = z === null ? true : sign * z > options.zThreshold;
  const low = shown(centre - options.zThreshold * spread);
  const high = shown(centre + options.zThreshold * spread);
  // A band too wide for a double has no edges to draw.
  const band: [number, number] | null = low === null || high === null ? null : [low, high];
  const zText =
    z === null
      ? 'the history has no spread'
      : `z = ${Number.isFinite(z) ? round(sign * z, 3) : 'beyond any number'} ${outsideBand ? '>' : '<='} ${options.zThreshold}`;
  const regression = beyondThreshold && outsideBand;
  const outcome = regression ? 'regression' : beyondThreshold ? 'within the noise band: not a regression' : `within the ${options.thresholdPct}% threshold`;
  const bandText = band ? `band ${band[0]}..${band[1]}` : 'band unbounded';
  return verdict(field, direction, round(head), headValues.length, window.length, {
    centre: round(centre),
    spread: shown(spread),
    change_pct: shownChange,
    z: z === null ? null : shown(z),
    band,
    method: 'z-score',
    regression,
    reason: `${pctText} (${bandText}), ${zText}: ${outcome}`,
  });
}
