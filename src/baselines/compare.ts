import type { BaselineRecord } from './schema.js';

/**
 * Comparison of two baseline records (pure). Times are better when lower, throughputs when higher.
 * The comparison tools' own times are shown for context but never flag a regression: they measure
 * the machine as much as us. What does flag one is the subject's own figures and the within-run
 * speedups (comparison tool time / subject time), which cancel out the machine's speed.
 */
export type Direction = 'lower_is_better' | 'higher_is_better';
/**
 * `worse`: worse, but not by more than the threshold (noise, not a regression); `regressed`: worse
 * beyond it on a field that can regress (then `regression` is true). A reference tool's time is at
 * most `worse`: it measures the machine.
 */
export type Status = 'improved' | 'worse' | 'regressed' | 'unchanged' | 'missing';

export interface MetricChange {
  field: string;
  role: 'subject' | 'reference';
  direction: Direction;
  unit: string;
  base: number | null;
  head: number | null;
  change: number | null;
  /** Relative change in percent; null when a side is missing, the base is 0, or it is beyond a double (1e-320 to 1e308). */
  change_pct: number | null;
  status: Status;
  regression: boolean;
}

export interface SpeedupChange {
  tool: 'alpha' | 'beta' | 'gamma';
  base: number | null;
  head: number | null;
  change_pct: number | null;
  status: Status;
  regression: boolean;
}

export interface ComparisonReport {
  threshold_pct: number;
  regressed: boolean;
  regressions: string[];
  base: { commit_sha: string; timestamp: string };
  head: { commit_sha: string; timestamp: string };
  metrics: MetricChange[];
  speedups: SpeedupChange[];
  warnings: string[];
}

export const METRICS: { field: keyof BaselineRecord; role: MetricChange['role']; direction: Direction; unit: string }[] = [
  { field: 'subject_geomean', role: 'subject', direction: 'lower_is_better', unit: 's' },
  { field: 'grep_1000_mean_ms', role: 'subject', direction: 'lower_is_better', unit: 'ms' },
  { field: 'throughput_mb_per_sec', role: 'subject', direction: 'higher_is_better', unit: 'MB/s' },
  { field: 'files_per_sec', role: 'subject', direction: 'higher_is_better', unit: 'files/s' },
  { field: 'total_runtime_sec', role: 'subject', direction: 'lower_is_better', unit: 's' },
  { field: 'alpha_geomean', role: 'reference', direction: 'lower_is_better', unit: 's' },
  { field: 'beta_geomean', role: 'reference', direction: 'lower_is_better', unit: 's' },
  { field: 'gamma_geomean', role: 'reference', direction: 'lower_is_better', unit: 's' },
];

export const DEFAULT_THRESHOLD_PCT = 10;
/** The largest threshold a request or the CLI takes, in percent. */
export const MAX_THRESHOLD_PCT = 10_000;

/** Rounded for display to `digits` significant digits; a value next to the largest double stays as it is (rounding up would overflow). */
export function round(value: number, digits = 4): number {
  const rounded = Number(value.toPrecision(digits));
  return Number.isFinite(rounded) ? rounded : value;
}
const numberOrNull = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : null);

/**
 * The relative change (percent, from the exact values: rounding happens for display only) and its
 * status. `change_pct` is null when it cannot be computed.
 */
function judge(base: number | null, head: number | null, direction: Direction, threshold: number, canRegress: boolean) {
  if (base === null || head === null) return { change_pct: null, status: 'missing' as Status, regression: false };
  if (base === head) return { change_pct: 0, status: 'unchanged' as Status, regression: false };
  const better = direction === 'lower_is_better' ? head < base : head > base;
  if (base === 0) {
    // From 0 to anything: no percentage exists; it is a regression only when it got worse.
    const regression = canRegress && !better;
    return { change_pct: null, status: (better ? 'improved' : regression ? 'regressed' : 'worse') as Status, regression };
  }
  // Possibly infinite (from 1e-320 to 1e308): the verdict still holds, the percentage is null.
  const exactPct = ((head - base) / base) * 100;
  const worseBy = direction === 'lower_is_better' ? exactPct : -exactPct;
  // Beyond the threshold by more than floating-point noise: 1 / (1 / 0.9) is not exactly 0.9.
  const regression = canRegress && worseBy > threshold + 1e-9;
  const status: Status = Math.abs(exactPct) < 1e-9 ? 'unchanged' : better ? 'improved' : regression ? 'regressed' : 'worse';
  return { change_pct: numberOrNull(round(exactPct)), status, regression };
}

/**
 * Each tool's field, spelt once: a name built on each call (`${tool}_geomean`) is a new string to look
 * up, and detection reads it three times per run of its history.
 */
const TOOL_FIELD = { alpha: 'alpha_geomean', beta: 'beta_geomean', gamma: 'gamma_geomean' } as const;

/** A within-run speedup (comparison tool time / subject time), exact; null when it cannot be computed (or overflows a double). */
export function speedup(record: BaselineRecord, tool: keyof typeof TOOL_FIELD): number | null {
  const other = numberOrNull(record[TOOL_FIELD[tool]]);
  const subject = numberOrNull(record.subject_geomean);
  if (other === null || subject === null || subject === 0) return null;
  return numberOrNull(other / subject);
}

const roundOrNull = (value: number | null) => (value === null ? null : round(value));

export function compareBaselines(base: BaselineRecord, head: BaselineRecord, thresholdPct = DEFAULT_THRESHOLD_PCT): ComparisonReport {
  const metrics: MetricChange[] = METRICS.map(({ field, role, direction, unit }) => {
    const baseValue = numberOrNull(base[field]);
    const headValue = numberOrNull(head[field]);
    const verdict = judge(baseValue, headValue, direction, thresholdPct, role === 'subject');
    return {
      field,
      role,
      direction,
      unit,
      base: baseValue,
      head: headValue,
      change: baseValue !== null && headValue !== null ? numberOrNull(round(headValue - baseValue, 6)) : null,
      ...verdict,
    };
  });
  const speedups: SpeedupChange[] = (['alpha', 'beta', 'gamma'] as const).map((tool) => {
    const baseValue = speedup(base, tool);
    const headValue = speedup(head, tool);
    return { tool, base: roundOrNull(baseValue), head: roundOrNull(headValue), ...judge(baseValue, headValue, 'higher_is_better', thresholdPct, true) };
  });

  const warnings: string[] = [];
  if (base.corpus_size !== undefined && head.corpus_size !== undefined && base.corpus_size !== head.corpus_size) {
    warnings.push(`corpus_size differs (${base.corpus_size} -> ${head.corpus_size}): search figures are not directly comparable`);
  }
  if (base.subject_geomean === 0 || head.subject_geomean === 0) warnings.push('subject_geomean is 0 (placeholder?): speedups cannot be computed');

  const regressions = [
    ...metrics.filter((metric) => metric.regression).map((metric) => metric.field),
    ...speedups.filter((entry) => entry.regression).map((entry) => `speedup_vs_${entry.tool}`),
  ];
  return {
    threshold_pct: thresholdPct,
    regressed: regressions.length > 0,
    regressions,
    base: { commit_sha: base.commit_sha, timestamp: base.timestamp },
    head: { commit_sha: head.commit_sha, timestamp: head.timestamp },
    metrics,
    speedups,
    warnings,
  };
}
