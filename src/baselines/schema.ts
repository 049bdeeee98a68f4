import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { FieldError } from '../errors.js';
import { fieldErrors } from '../http/index.js';

/** A baseline record (docs/baselines.md), as shipped in schemas/baseline.schema.json. */
export interface BaselineRecord {
  commit_sha: string;
  commit_url?: string;
  timestamp: string;
  subject_geomean: number;
  alpha_geomean?: number;
  beta_geomean?: number;
  gamma_geomean?: number;
  grep_1000_mean_ms: number;
  throughput_mb_per_sec?: number;
  files_per_sec?: number;
  total_runtime_sec?: number;
  corpus_size?: number;
  notes?: string;
}

export const BASELINE_SCHEMA_PATH = new URL('../../../schemas/baseline.schema.json', import.meta.url);
export const baselineSchema = JSON.parse(readFileSync(BASELINE_SCHEMA_PATH, 'utf8')) as Record<string, unknown>;

// Compiled once, in strict mode: a schema mistake fails at start-up, not on the first request.
const ajv = new Ajv2020({ strict: true, allErrors: true });
addFormats.default(ajv);
export const validateBaseline = ajv.compile<BaselineRecord>(baselineSchema);

const VALID: readonly FieldError[] = Object.freeze([]);

/**
 * The years a run may be stamped in, checked without a clock (`baseline validate` too): year 0000
 * reads as nonsense in every chart. The server also refuses a run ahead of its clock (FUTURE_LEEWAY_MS).
 */
const RUN_TIME_RANGE = { from: Date.parse('1970-01-01T00:00:00Z'), to: Date.parse('2100-01-01T00:00:00Z') };

/**
 * The calendar years whose every time lies in RUN_TIME_RANGE whatever its offset (an offset is under
 * a day): a timestamp of these years needs no parsing, which costs more than the schema check itself.
 */
const SURELY_IN_RANGE = { from: 1971, to: 2098 };

/**
 * How far ahead of the server's clock a run may be stamped: a runner's clock a little fast. A run
 * further ahead would stay "latest", and be every push's previous run, until that time came.
 */
export const FUTURE_LEEWAY_MS = 60 * 60_000;

/** The error of a run stamped after `nowMs` + FUTURE_LEEWAY_MS, or none; `clock` names whose clock `nowMs` is. */
export function futureError(record: Pick<BaselineRecord, 'timestamp'>, nowMs: number, clock = "the server's clock"): FieldError[] {
  return Date.parse(runAt(record.timestamp)) > nowMs + FUTURE_LEEWAY_MS
    ? [
        {
          path: '/timestamp',
          message: `must be at most ${FUTURE_LEEWAY_MS / 60_000} minutes ahead of ${clock}, which reads ${new Date(nowMs).toISOString()}`,
        },
      ]
    : [];
}

/** Every violation of the record, as JSON pointer + reason (empty when valid). */
export function baselineErrors(record: unknown): readonly FieldError[] {
  if (!validateBaseline(record)) {
    const errors = validateBaseline.errors ?? [];
    // A time that is not one at all breaks its offset's pattern too: one error for it is enough.
    const notTimes = new Set(errors.filter((error) => error.keyword === 'format').map((error) => error.instancePath));
    return fieldErrors(errors.filter((error) => error.keyword !== 'pattern' || !notTimes.has(error.instancePath)));
  }
  // The schema's date-time format guarantees four digits of year first.
  const year = Number(record.timestamp.slice(0, 4));
  if (year >= SURELY_IN_RANGE.from && year <= SURELY_IN_RANGE.to) return VALID;
  const at = Date.parse(runAt(record.timestamp));
  if (!(at >= RUN_TIME_RANGE.from && at < RUN_TIME_RANGE.to)) return [{ path: '/timestamp', message: 'must be a time from 1970 up to 2100' }];
  return VALID;
}

/**
 * A record's JSON text as stored: as sent, without a byte order mark, which JSON texts do not carry
 * (RFC 8259 section 8.1) though editors on Windows add one. The parser ignores it; `JSON.parse` does not.
 */
export const withoutByteOrderMark = (text: string): string => (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text);

/** The schema without the meta keywords, for embedding in the OpenAPI document. */
export const baselineSchemaForOpenApi = Object.fromEntries(Object.entries(baselineSchema).filter(([key]) => !['$schema', '$id'].includes(key)));

/**
 * When a run happened, as a sortable UTC instant: the record's `timestamp` (RFC 3339, any offset).
 * A leap second (`23:59:60`, valid RFC 3339, unknown to Date) counts as the second before it.
 */
export function runAt(timestamp: string): string {
  const ms = Date.parse(timestamp);
  return new Date(Number.isNaN(ms) ? Date.parse(timestamp.replace(/:60(?=[.,Zz+-])/, ':59')) : ms).toISOString();
}
