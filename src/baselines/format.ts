import { METRICS, type ComparisonReport, type Status } from './compare.js';
import type { Detection } from './detect.js';
import type { BaselineRecord } from './schema.js';
import type { StoredBaseline } from './service.js';

export type ReportFormat = 'table' | 'json' | 'markdown';

const show = (value: number | null) => (value === null ? '-' : String(value));
const pct = (value: number | null) => (value === null ? '-' : `${value > 0 ? '+' : ''}${value.toFixed(2)}%`);
const MARK: Record<Status, string> = {
  improved: 'improved',
  worse: 'worse (within threshold)',
  regressed: 'REGRESSION',
  unchanged: 'unchanged',
  missing: 'missing',
};

/** One entry per metric and speedup, labelled as every format shows it. */
function entries(report: ComparisonReport) {
  return [
    ...report.metrics.map((metric) => ({ ...metric, label: `${metric.field} (${metric.unit})${metric.role === 'reference' ? ' [ref]' : ''}` })),
    ...report.speedups.map((entry) => ({ ...entry, label: `speedup vs ${entry.tool} (x)` })),
  ];
}

function rows(report: ComparisonReport): string[][] {
  return entries(report).map((entry) => [entry.label, show(entry.base), show(entry.head), pct(entry.change_pct), MARK[entry.status]]);
}

const HEADER = ['metric', 'base', 'head', 'change', 'status'];

function verdict(report: ComparisonReport): string {
  return report.regressed ? `REGRESSED beyond ${report.threshold_pct}%: ${report.regressions.join(', ')}` : `No regression beyond ${report.threshold_pct}%`;
}

/** Renders a comparison for a terminal, a machine, or a pull-request comment. */
export function formatReport(report: ComparisonReport, format: ReportFormat): string {
  if (format === 'json') return JSON.stringify(report, null, 2);
  const table = rows(report);
  if (format === 'markdown') {
    const icon = report.regressed ? ':x:' : ':white_check_mark:';
    const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
    return [
      `### Benchmark comparison: \`${report.base.commit_sha}\` → \`${report.head.commit_sha}\``,
      '',
      `${icon} ${verdict(report)}`,
      '',
      line(HEADER),
      line(HEADER.map((_, index) => (index === 0 ? '---' : '---:'))),
      ...table.map((cells) => line(cells.map((cell, index) => (index === 4 && cell === 'REGRESSION' ? '**REGRESSION**' : cell)))),
      ...(report.warnings.length ? ['', ...report.warnings.map((warning) => `> :warning: ${warning}`)] : []),
      '',
    ].join('\n');
  }
  const widths = HEADER.map((_, column) => Math.max(HEADER[column]!.length, ...table.map((cells) => cells[column]!.length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ');
  return [
    `base ${report.base.commit_sha} (${report.base.timestamp})  ->  head ${report.head.commit_sha} (${report.head.timestamp})`,
    '',
    line(HEADER),
    line(widths.map((width) => '-'.repeat(width))),
    ...table.map(line),
    '',
    verdict(report),
    ...report.warnings.map((warning) => `warning: ${warning}`),
    '',
  ].join('\n');
}

/** The run history (newest first) for a terminal, a machine, or a pull-request comment. */
export function formatHistory(runs: StoredBaseline[], format: ReportFormat): string {
  if (format === 'json') return JSON.stringify(runs, null, 2);
  const header = ['id', 'run timestamp', 'commit', 'subject_geomean (s)', 'grep_1000_mean_ms (ms)'];
  const table = runs.map((run) => [
    String(run.id),
    run.record.timestamp,
    run.record.commit_sha,
    show(run.record.subject_geomean),
    show(run.record.grep_1000_mean_ms),
  ]);
  if (format === 'markdown') {
    const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
    return [line(header), line(header.map((_, index) => (index < 3 ? '---' : '---:'))), ...table.map(line), ''].join('\n');
  }
  const widths = header.map((_, column) => Math.max(header[column]!.length, ...table.map((cells) => cells[column]!.length)));
  const line = (cells: string[]) => cells.map((cell, column) => (column < 3 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join('  ');
  return [line(header), line(widths.map((width) => '-'.repeat(width))), ...table.map(line), ''].join('\n');
}

/** How the history judged a run, as a phrase. */
function historyMethod(detection: Detection): string {
  return detection.method === 'z-score'
    ? `the mean of ${detection.runs_considered} earlier commits with a noise band of ${detection.z_threshold} standard deviations, threshold ${detection.threshold_pct}%`
    : detection.method === 'threshold'
      ? `the mean of ${detection.runs_considered} earlier commit${detection.runs_considered === 1 ? '' : 's'}, threshold ${detection.threshold_pct}% alone`
      : 'no earlier runs';
}

/** The history-aware verdict and why, for a terminal or a pull-request comment (JSON callers take the object). */
export function formatDetection(detection: Detection, format: Exclude<ReportFormat, 'json'>): string {
  const how = historyMethod(detection);
  const verdict = detection.regressed ? `REGRESSED: ${detection.regressions.join(', ')}` : 'no regression';
  const reasons = detection.fields
    .filter((field) => field.method !== 'none')
    .map((field) => `${field.regression ? 'REGRESSION ' : ''}${field.field}: ${field.reason}`);
  if (format === 'markdown') {
    return [
      `#### Against the history (${how})`,
      '',
      `${detection.regressed ? ':x:' : ':white_check_mark:'} ${verdict}`,
      ...(detection.note ? ['', `> ${detection.note}`] : []),
      '',
      ...reasons.map((reason) => `- ${reason}`),
      '',
    ].join('\n');
  }
  return [`Against the history (${how}): ${verdict}`, ...(detection.note ? [detection.note] : []), ...reasons.map((reason) => `  ${reason}`), ''].join('\n');
}

/** What `baseline push` recorded: the server's answer and the record sent. */
export interface PushResult {
  id: number;
  record: BaselineRecord;
  comparison: ComparisonReport | null;
  detection: Detection;
}

const SUMMARY_MARK: Partial<Record<Status, string>> = { regressed: '**REGRESSION**', improved: 'improved', worse: 'worse (comparison tool, not gated)' };

/**
 * The GitHub job summary of one push: the verdict that sets the exit code first, then only what
 * changed beyond the threshold against the previous run; everything else is one line, so a quiet
 * run reads in a glance. The first run says so and shows its values.
 */
export function formatPushSummary({ id, record, comparison, detection }: PushResult): string {
  const commit = `\`${record.commit_sha}\``;
  if (!comparison) {
    const values = METRICS.filter(({ field }) => typeof record[field] === 'number').map(({ field, unit }) => `| ${field} | ${record[field]} ${unit} |`);
    return [
      `### Benchmark baseline ${commit}: recorded, the first run`,
      '',
      `:information_source: Run ${id} has no earlier run on this server: nothing to compare with, so nothing can regress yet. The next push is compared with it.`,
      '',
      '| metric | value |',
      '| --- | ---: |',
      ...values,
      '',
    ].join('\n');
  }
  const threshold = comparison.threshold_pct;
  const all = entries(comparison);
  const changed = all.filter(
    (entry) =>
      entry.regression || ((entry.status === 'improved' || entry.status === 'worse') && (entry.change_pct === null || Math.abs(entry.change_pct) > threshold)),
  );
  const oneSided = all.filter((entry) => entry.status === 'missing' && (entry.base !== null || entry.head !== null));
  const quiet = all.length - changed.length - oneSided.length - all.filter((entry) => entry.base === null && entry.head === null).length;
  // Regressions first, then improvements, then the comparison tools' own changes.
  const order: Status[] = ['regressed', 'improved', 'worse'];
  changed.sort((a, b) => order.indexOf(a.status) - order.indexOf(b.status));
  const line = (cells: string[]) => `| ${cells.join(' | ')} |`;
  const regressedFields = detection.fields.filter((field) => field.regression);
  return [
    `### Benchmark baseline ${commit}: ${detection.regressed ? ':x: regressed' : ':white_check_mark: no regression'}`,
    '',
    detection.regressed ? `**Against the history** (${historyMethod(detection)}):` : `Against the history (${historyMethod(detection)}): no regression.`,
    ...(detection.regressed ? ['', ...regressedFields.map((field) => `- **${field.field}**: ${field.reason}`)] : []),
    ...(detection.note ? ['', `> ${detection.note}`] : []),
    '',
    `Against the previous run \`${comparison.base.commit_sha}\` (this run is recorded as ${id}):`,
    '',
    ...(changed.length
      ? [
          line([`changed beyond ${threshold}%`, 'previous', 'this run', 'change', '']),
          line(['---', '---:', '---:', '---:', '---']),
          ...changed.map((entry) => line([entry.label, show(entry.base), show(entry.head), pct(entry.change_pct), SUMMARY_MARK[entry.status]!])),
          '',
        ]
      : []),
    `${changed.length ? `${quiet} other` : `All ${quiet}`} metric${quiet === 1 ? '' : 's'} within ±${threshold}% of the previous run.`,
    ...(oneSided.length ? ['', `In only one of the two runs: ${oneSided.map((entry) => entry.label).join(', ')}.`] : []),
    ...comparison.warnings.map((warning) => `\n> :warning: ${warning}`),
    '',
  ].join('\n');
}

/** Why a push failed, for the job summary: the problem, its fields, and what to do about it. */
export interface PushFailure {
  title: string;
  detail: string;
  errors: string[];
  todo: string;
  commit?: string;
}

/**
 * Text from outside (the record file's field names and values echoed in its problems, a server's
 * answer) as inline Markdown that stays text: on one line (a line break could start a heading, a
 * table, a fake verdict) and with what opens HTML, links, code or table cells backslash-escaped.
 */
function markdownText(text: string): string {
  return text.replace(/[\p{Cc}\u2028\u2029]/gu, ' ').replace(/[\\`*[\]<>&|!#~]/g, '\\$&');
}

/** `title`, `detail`, `errors`: plain text, escaped here; `todo`: Markdown of ours. */
export function formatPushFailure({ title, detail, errors, todo, commit }: PushFailure): string {
  return [
    `### Benchmark baseline${commit ? ` \`${commit}\`` : ''}: :x: push failed`,
    '',
    `**${markdownText(title)}**: ${markdownText(detail)}`,
    ...(errors.length ? ['', ...errors.map((error) => `- ${markdownText(error)}`)] : []),
    '',
    `**What to do**: ${todo}`,
    '',
  ].join('\n');
}
