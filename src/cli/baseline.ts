import { readFileSync } from 'node:fs';
import { baselineErrors, type BaselineRecord } from '../baselines/schema.js';
import { compareBaselines, DEFAULT_THRESHOLD_PCT } from '../baselines/compare.js';
import { formatReport, type ReportFormat } from '../baselines/format.js';
import type { Output } from './io.js';

/** Reads and validates one record file; returns the record or the printed reasons it is not one. */
function load(file: string, io: Output): BaselineRecord | null {
  let data: unknown;
  try {
    data = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    io.err(`${file}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : `not valid JSON (${(error as Error).message})`}`);
    return null;
  }
  const errors = baselineErrors(data);
  for (const error of errors) io.err(`${file}: ${error.path}: ${error.message}`);
  return errors.length ? null : (data as BaselineRecord);
}

/** `mothership baseline validate FILE...`: 0 when every file is a valid record, 1 otherwise. */
export function validateCommand(files: string[], io: Output): number {
  if (files.length === 0) {
    io.err('usage: mothership baseline validate FILE...');
    return 2;
  }
  let failures = 0;
  for (const file of files) {
    if (load(file, io)) io.out(`${file}: valid`);
    else failures++;
  }
  return failures ? 1 : 0;
}

/** `mothership baseline compare BASE HEAD [--threshold PCT] [--format table|json|markdown]`: 1 on regression. */
export function compareCommand(args: string[], io: Output): number {
  const files: string[] = [];
  let threshold = DEFAULT_THRESHOLD_PCT;
  let format: ReportFormat = 'table';
  for (let index = 0; index < args.length; index++) {
    const arg = args[index]!;
    const [flag, inline] = arg.startsWith('--') ? arg.split('=', 2) : [arg, undefined];
    const value = () => inline ?? args[++index];
    if (flag === '--threshold') {
      const text = value();
      threshold = Number(text);
      if (text === undefined || !Number.isFinite(threshold) || threshold < 0) {
        io.err(`--threshold must be a number >= 0, got "${text ?? ''}"`);
        return 2;
      }
    } else if (flag === '--format') {
      const text = value();
      if (text !== 'table' && text !== 'json' && text !== 'markdown') {
        io.err(`--format must be table, json or markdown, got "${text ?? ''}"`);
        return 2;
      }
      format = text;
    } else if (arg.startsWith('--')) {
      io.err(`unknown option ${arg}`);
      return 2;
    } else files.push(arg);
  }
  if (files.length !== 2) {
    io.err('usage: mothership baseline compare BASE.json HEAD.json [--threshold PCT] [--format table|json|markdown]');
    return 2;
  }
  const base = load(files[0]!, io);
  const head = load(files[1]!, io);
  if (!base || !head) return 2;
  const report = compareBaselines(base, head, threshold);
  io.out(formatReport(report, format));
  return report.regressed ? 1 : 0;
}
