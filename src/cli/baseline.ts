import { appendFileSync, closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { BASELINE_RECORD_LIMIT } from '../limits.js';
import {
  baselineErrors,
  type BaselineRecord,
  compareBaselines,
  type ComparisonReport,
  DEFAULT_THRESHOLD_PCT,
  futureError,
  MAX_THRESHOLD_PCT,
  formatDetection,
  formatHistory,
  formatPushFailure,
  formatPushSummary,
  formatReport,
  type ReportFormat,
  withoutByteOrderMark,
} from '../baselines/index.js';
import type { Detection, StoredBaseline } from '../baselines/index.js';
import type { FieldError } from '../errors.js';
import type { Output } from './io.js';
import { serverRequest, serverUrl, ServerError, UsageError } from './server.js';

/** Exit codes of every baseline command: CI reads them. */
const OK = 0;
const REGRESSED = 1;
const ERROR = 2;
const FORMATS: ReportFormat[] = ['table', 'json', 'markdown'];
const CI_TOKEN = 'an API token of scope ci, made on the Tokens page or with POST /api/tokens';

type Loaded = { record: BaselineRecord; text: string } | { problems: string[] };

/**
 * A record file's text, or why it cannot be one: at most a record's size is read, so a device such
 * as /dev/zero is refused, not read for ever; a pipe (`<(jq ...)`, /dev/stdin) is read as a file is.
 */
function readRecordFile(file: string): { text: string } | { problem: string } {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (error) {
    const { code, message } = error as NodeJS.ErrnoException;
    return { problem: code === 'ENOENT' ? 'file not found' : `cannot be read (${message})` };
  }
  try {
    if (fstatSync(fd).isDirectory()) return { problem: 'a directory, not a record file' };
    const buffer = Buffer.alloc(BASELINE_RECORD_LIMIT + 1);
    let length = 0;
    while (length < buffer.length) {
      const read = readSync(fd, buffer, length, buffer.length - length, null);
      if (read === 0) break;
      length += read;
    }
    if (length > BASELINE_RECORD_LIMIT) return { problem: `larger than a record may be (${BASELINE_RECORD_LIMIT} bytes)` };
    return { text: buffer.toString('utf8', 0, length) };
  } catch (error) {
    return { problem: `cannot be read (${(error as Error).message})` };
  } finally {
    closeSync(fd);
  }
}

/** Reads and validates one record file; returns the record and its text, or prints (and returns) why it is not one. */
function load(file: string, io: Output): Loaded {
  const read = readRecordFile(file);
  // A Windows editor's byte order mark is not JSON; the API takes such a file, so does the CLI.
  const text = 'text' in read ? withoutByteOrderMark(read.text) : '';
  const data = 'text' in read ? parseJson(text) : read;
  const problems = ('problem' in data ? [data.problem] : recordErrors(data.value).map((error) => `${error.path}: ${error.message}`)).map(
    (problem) => `${file}: ${problem}`,
  );
  for (const problem of problems) io.err(problem);
  return 'value' in data && problems.length === 0 ? { record: data.value as BaselineRecord, text } : { problems };
}

/** What the server would refuse in a record: the schema, then its run time against this machine's clock (years ahead fails before any request). */
function recordErrors(value: unknown): readonly FieldError[] {
  const errors = baselineErrors(value);
  return errors.length ? errors : futureError(value as BaselineRecord, Date.now(), "this machine's clock");
}

function parseJson(text: string): { value: unknown } | { problem: string } {
  try {
    return { value: JSON.parse(text) };
  } catch (error) {
    return { problem: `not valid JSON (${(error as Error).message})` };
  }
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
  // Written in decimal: Number() also reads "" and " " as 0 (an unset variable in a CI script) and "0x10" as 16.
  if (!/^(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/.test(threshold) || !(thresholdPct <= MAX_THRESHOLD_PCT))
    throw new UsageError(`--threshold must be a decimal number from 0 to ${MAX_THRESHOLD_PCT}, got "${threshold}"`);
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
    if ('record' in load(file, io)) io.out(`${file}: valid`);
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
    if (!('record' in base) || !('record' in head)) return ERROR;
    return report(compareBaselines(base.record, head.record, thresholdPct), format, io);
  });
}

/** A number as the API takes it in a URL: decimal text, never the exponent form JavaScript gives 1e-7. */
const decimal = (value: number): string => value.toLocaleString('en-US', { useGrouping: false, maximumFractionDigits: 20 });

const PUSH_USAGE = 'usage: MOTHERSHIP_TOKEN=... mothership baseline push FILE --server URL [--threshold PCT] [--format table|json|markdown]';

/** A record file that is not a valid baseline: its problems are already printed. */
class RecordFileError extends Error {
  constructor(
    readonly file: string,
    readonly problems: string[],
  ) {
    super(`${file} is not a valid baseline record`);
  }
}

/**
 * `mothership baseline push FILE --server URL`: records the run on a server, prints the server's
 * comparison with the previous run and its verdict against the history, and exits 1 when the history
 * says it regressed, 0 otherwise, 2 on any error. With `GITHUB_STEP_SUMMARY` set (GitHub Actions),
 * every push appends a short summary to the job's page, a failed one included.
 */
export function pushCommand(args: string[], io: Output, env: NodeJS.ProcessEnv): Promise<number> {
  return command(io, async () => {
    let commit: string | undefined;
    try {
      const { files, thresholdPct, format, server } = options(args, PUSH_USAGE, true, env);
      if (files.length !== 1) throw new UsageError(PUSH_USAGE);
      const run = load(files[0]!, io);
      if (!('record' in run)) throw new RecordFileError(files[0]!, run.problems);
      commit = run.record.commit_sha;
      const sent = withCommitUrl(run.record, run.text, env);
      const post = (body: string) =>
        serverRequest<{ id: number; comparison: ComparisonReport | null; detection: Detection }>(
          `${server}/api/baselines?threshold=${decimal(thresholdPct)}`,
          env,
          {
            method: 'POST',
            body,
            needs: CI_TOKEN,
          },
        );
      let record = sent.record;
      const recorded = await post(sent.body).catch((error: unknown) => {
        // A server older than `commit_url` (0.2.0) refuses the field this command added: the record goes as written.
        if (sent.record === run.record || !(error instanceof ServerError) || !error.problem?.errors?.some((entry) => entry.path === '/commit_url')) throw error;
        record = run.record;
        return post(run.text);
      });
      const { comparison, detection } = recorded;
      if (format === 'json') io.out(JSON.stringify({ id: recorded.id, comparison, detection }, null, 2));
      else if (!comparison) io.out(`Recorded baseline ${recorded.id} (${record.commit_sha}): the first run, nothing to compare with.`);
      else io.out(formatReport(comparison, format) + '\n' + formatDetection(detection, format));
      if (env.GITHUB_STEP_SUMMARY) appendFileSync(env.GITHUB_STEP_SUMMARY, formatPushSummary({ ...recorded, record }) + '\n');
      return detection.regressed ? REGRESSED : OK;
    } catch (error) {
      if (env.GITHUB_STEP_SUMMARY) appendFileSync(env.GITHUB_STEP_SUMMARY, formatPushFailure({ ...failure(error), commit }) + '\n');
      if (error instanceof RecordFileError) return ERROR;
      throw error;
    }
  });
}

/**
 * In GitHub Actions, a record without `commit_url` gets its commit's page (GITHUB_SERVER_URL and
 * GITHUB_REPOSITORY), so the dashboard links each point without the benchmark knowing where it runs.
 * Any other record is sent byte for byte.
 */
function withCommitUrl(record: BaselineRecord, text: string, env: NodeJS.ProcessEnv): { record: BaselineRecord; body: string } {
  if (record.commit_url || !env.GITHUB_SERVER_URL || !env.GITHUB_REPOSITORY || !/^[a-fA-F0-9]+$/.test(record.commit_sha)) return { record, body: text };
  const withUrl = { ...record, commit_url: `${env.GITHUB_SERVER_URL.replace(/\/+$/, '')}/${env.GITHUB_REPOSITORY}/commit/${record.commit_sha}` };
  // A repository name that does not make a valid URL: the record goes as written.
  return baselineErrors(withUrl).length ? { record, body: text } : { record: withUrl, body: JSON.stringify(withUrl) };
}

const NOTHING_SENT = 'Nothing was sent to the server.';
const NOTHING_RECORDED = 'Nothing was recorded.';

/** A failed push in the job summary's words: what went wrong and what to do about it. */
function failure(error: unknown): { title: string; detail: string; errors: string[]; todo: string } {
  if (error instanceof RecordFileError)
    return {
      title: 'Not a valid baseline record',
      detail: error.file,
      errors: error.problems,
      todo: `fix the file your benchmark writes (its fields: docs/baselines.md, "The record"; \`mothership baseline validate FILE\` checks it) and re-run. ${NOTHING_SENT}`,
    };
  if (error instanceof UsageError)
    return {
      title: 'The push step is not set up',
      detail: error.message,
      errors: [],
      todo: `fix the step's command line or environment as the message says. ${NOTHING_SENT}`,
    };
  if (error instanceof ServerError) {
    const errors = (error.problem?.errors ?? []).map((entry) => `${entry.path}: ${entry.message}`);
    const title =
      error.status !== undefined ? `${error.problem?.title ?? 'Refused'} (${error.status})` : error.sent ? 'The answer was lost' : 'Server not reached';
    const detail = error.problem?.detail ?? error.message;
    if (error.sent)
      return {
        title,
        detail,
        errors,
        todo: 'the run may have been recorded before the answer was lost: `mothership baseline history` shows whether it was; push again only if it was not.',
      };
    if (error.status === undefined)
      return {
        title,
        detail,
        errors,
        todo: `check \`--server\` (or MOTHERSHIP_SERVER): the Mothership URL, up and reachable from this runner. ${NOTHING_RECORDED}`,
      };
    if (error.status === 401)
      return { title, detail, errors, todo: `MOTHERSHIP_TOKEN must hold a valid token: store ${CI_TOKEN} as this job's secret. ${NOTHING_RECORDED}` };
    if (error.status === 403) return { title, detail, errors, todo: `this token may not push baselines: use ${CI_TOKEN}. ${NOTHING_RECORDED}` };
    if (error.status < 500) return { title, detail, errors, todo: `the server refused this run: fix what it names and re-run. ${NOTHING_RECORDED}` };
    return {
      title,
      detail,
      errors,
      todo: 'the server failed: re-run the job; if it fails again, the server log says why. Whether the run was recorded: `mothership baseline history`.',
    };
  }
  return { title: 'Unexpected error', detail: (error as Error).message, errors: [], todo: 're-run the job; if it fails again, report the message.' };
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
