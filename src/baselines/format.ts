import type { ComparisonReport, Status } from './compare.js';
import type { Detection } from './detect.js';
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

function rows(report: ComparisonReport): string[][] {
  return [
    ...report.metrics.map((metric) => [
      `${metric.field} (${metric.unit})${metric.role === 'reference' ? ' [ref]' : ''}`,
      show(metric.base),
      show(metric.head),
      pct(metric.change_pct),
      MARK[metric.status],
    ]),
    ...report.speedups.map((entry) => [`speedup vs ${entry.tool} (x)`, show(entry.base), show(entry.head), pct(entry.change_pct), MARK[entry.status]]),
  ];
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

/** The history-aware verdict and why, for a terminal or a pull-request comment (JSON callers take the object). */
export function formatDetection(detection: Detection, format: Exclude<ReportFormat, 'json'>): string {
  const how =
    detection.method === 'z-score'
      ? `the mean of ${detection.runs_considered} earlier commits with a noise band of ${detection.z_threshold} standard deviations, threshold ${detection.threshold_pct}%`
      : detection.method === 'threshold'
        ? `the mean of ${detection.runs_considered} earlier commit${detection.runs_considered === 1 ? '' : 's'}, threshold ${detection.threshold_pct}% alone`
        : 'no earlier runs';
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
