import { appendFileSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import {
  baselineErrors,
  type BaselineRecord,
  compareBaselines,
  type ComparisonReport,
  DEFAULT_THRESHOLD_PCT,
  formatDetection,
  formatHistory,
  formatReport,
  type ReportFormat,
} from '../baselines/index.js';
import type { Detection, StoredBaseline } from '../baselines/index.js';
import type { Output } from './io.js';
import { serverRequest, serverUrl, ServerError, UsageError } from './server.js';

/** Exit codes of every baseline command: CI reads them. */
const OK = 0;
const REGRESSED = 1;
const ERROR = 2;
const FORMATS: ReportFormat[] = ['table', 'json', 'markdown'];
const CI_TOKEN = 'an API token of scope ci, made on the Tokens page or with POST /api/tokens';

/** Reads and validates one record file; returns the record and its text, or prints why it is not one. */
function load(file: string, io: Output): { record: BaselineRecord; text: string } | null {
  let text: string;
  let data: unknown;
  try {
    text = readFileSync(file, 'utf8');
    data = JSON.parse(text);
  } catch (error) {
    io.err(`${file}: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : `not valid JSON (${(error as Error).message})`}`);
    return null;
  }
  const errors = baselineErrors(data);
  for (const error of errors) io.err(`${file}: ${error.path}: ${error.message}`);
  return errors.length ? null : { record: data as BaselineRecord, text };
}

/** The options every baseline command shares, read with Node's own parser; a bad value is a UsageError. */
function options(args: string[], usage: string, needsServer: boolean, env: NodeJS.ProcessEnv = {}) {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: { threshold: { type: 'string' }, format: { type: 'string' }, server: { type: 'string' }, limit: { type: 'string' } },
    });
  } catch (error) {
    throw new UsageError(`${(error as Error).message}\n${usage}`);
  }
  const { threshold = String(DEFAULT_THRESHOLD_PCT), format = 'table', server, limit = '20' } = parsed.values;
  const thresholdPct = Number(threshold);
  if (!Number.isFinite(thresholdPct) || thresholdPct < 0) throw new UsageError(`--threshold must be a number >= 0, got "${threshold}"`);
  if (!FORMATS.includes(format as ReportFormat)) throw new UsageError(`--format must be table, json or markdown, got "${format}"`);
  if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > 500) throw new UsageError(`--limit must be 1..500, got "${limit}"`);
  const url = serverUrl(server, env);
  if (needsServer && !url) throw new UsageError(`--server URL is required (or set MOTHERSHIP_SERVER)\n${usage}`);
  return { files: parsed.positionals, thresholdPct, format: format as ReportFormat, server: url, limit: Number(limit) };
}

/** Runs a command body: any failure is exit 2 with its message (1 means "regressed" to CI, never "crashed"). */
async function command(io: Output, body: () => Promise<number> | number): Promise<number> {
  try {
    return await body();
  } catch (error) {
    io.err(error instanceof UsageError || error instanceof ServerError ? error.message : `error: ${(error as Error).message}`);
    return ERROR;
  }
}

/** `mothership baseline validate FILE...`: 0 when every file is a valid record, 1 otherwise. */
export function validateCommand(files: string[], io: Output): number {
  if (files.length === 0) {
    io.err('usage: mothership baseline validate FILE...');
    return ERROR;
  }
  let failures = 0;
  for (const file of files) {
    if (load(file, io)) io.out(`${file}: valid`);
    else failures++;
  }
  return failures ? 1 : OK;
}

const COMPARE_USAGE = 'usage: mothership baseline compare BASE.json HEAD.json [--threshold PCT] [--format table|json|markdown]';

/** `mothership baseline compare BASE HEAD`: 1 on a regression, 2 on an error. */
export function compareCommand(args: string[], io: Output): Promise<number> {
  return command(io, () => {
    const { files, thresholdPct, format } = options(args, COMPARE_USAGE, false);
    if (files.length !== 2) throw new UsageError(COMPARE_USAGE);
    const base = load(files[0]!, io);
    const head = load(files[1]!, io);
    if (!base || !head) return ERROR;
    return report(compareBaselines(base.record, head.record, thresholdPct), format, io);
  });
}

const PUSH_USAGE = 'usage: MOTHERSHIP_TOKEN=... mothership baseline push FILE --server URL [--threshold PCT] [--format table|json|markdown]';

/**
 * `mothership baseline push FILE --server URL`: records the run on a server, prints the server's
 * comparison with the previous run and its verdict against the history, and exits 1 when the history
 * says it regressed, 0 otherwise, 2 on any error. With `GITHUB_STEP_SUMMARY` set (GitHub Actions),
 * the markdown report is appended to the job summary.
 */
export function pushCommand(args: string[], io: Output, env: NodeJS.ProcessEnv): Promise<number> {
  return command(io, async () => {
    const { files, thresholdPct, format, server } = options(args, PUSH_USAGE, true, env);
    if (files.length !== 1) throw new UsageError(PUSH_USAGE);
    const run = load(files[0]!, io);
    if (!run) return ERROR;
    const recorded = await serverRequest<{ id: number; comparison: ComparisonReport | null; detection: Detection }>(
      `${server}/api/baselines?threshold=${thresholdPct}`,
      env,
      { method: 'POST', body: run.text, needs: CI_TOKEN },
    );
    const { comparison, detection } = recorded;
    if (format === 'json') io.out(JSON.stringify({ id: recorded.id, comparison, detection }, null, 2));
    else if (!comparison) io.out(`Recorded baseline ${recorded.id} (${run.record.commit_sha}): the first run, nothing to compare with.`);
    else io.out(formatReport(comparison, format) + '\n' + formatDetection(detection, format));
    if (comparison && env.GITHUB_STEP_SUMMARY)
      appendFileSync(env.GITHUB_STEP_SUMMARY, formatReport(comparison, 'markdown') + '\n' + formatDetection(detection, 'markdown') + '\n');
    return detection.regressed ? REGRESSED : OK;
  });
}

const HISTORY_USAGE = 'usage: MOTHERSHIP_TOKEN=... mothership baseline history --server URL [--limit N] [--format table|json|markdown]';

/** `mothership baseline history --server URL`: the newest runs on the server, in run order. */
export function historyCommand(args: string[], io: Output, env: NodeJS.ProcessEnv): Promise<number> {
  return command(io, async () => {
    const { files, format, server, limit } = options(args, HISTORY_USAGE, true, env);
    if (files.length) throw new UsageError(HISTORY_USAGE);
    io.out(formatHistory(await serverRequest<StoredBaseline[]>(`${server}/api/baselines?limit=${limit}`, env, { method: 'GET', needs: CI_TOKEN }), format));
    return OK;
  });
}

function report(comparison: ComparisonReport, format: ReportFormat, io: Output): number {
  io.out(formatReport(comparison, format));
  return comparison.regressed ? REGRESSED : OK;
}
