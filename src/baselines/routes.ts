import type { FastifyInstance } from 'fastify';
import { pageLimit, perPage, rowId, rowIdParams, textValidator, withSchemaTypes } from '../http/index.js';
import { BASELINE_RECORD_LIMIT, RECORD_PAGE } from '../limits.js';
import { baselineErrors, baselineSchema, baselineSchemaForOpenApi, withoutByteOrderMark, type BaselineRecord } from './schema.js';
import type { BaselineService } from './service.js';
import { DEFAULT_THRESHOLD_PCT, MAX_THRESHOLD_PCT } from './compare.js';
import { invalidFields } from '../errors.js';

/** A route validator (Fastify's `{ error }` form) of a record by baselineErrors. */
function checkRecord(record: unknown): true | { error: Error } {
  const errors = baselineErrors(record);
  return errors.length === 0 || { error: invalidFields([...errors]) };
}

const nullableNumber = { type: ['number', 'null'] } as const;
const methodSchema = { type: 'string', enum: ['z-score', 'threshold', 'none'] } as const;
/** detect.ts, FieldDetection: one field's verdict. */
const fieldDetectionSchema = {
  type: 'object',
  required: ['field', 'direction', 'head', 'head_runs', 'centre', 'spread', 'runs_considered', 'change_pct', 'z', 'band', 'method', 'regression', 'reason'],
  properties: {
    field: { type: 'string' },
    direction: { type: 'string', enum: ['lower_is_better', 'higher_is_better'] },
    head: nullableNumber,
    head_runs: { type: 'integer' },
    centre: nullableNumber,
    spread: nullableNumber,
    runs_considered: { type: 'integer' },
    change_pct: nullableNumber,
    z: nullableNumber,
    band: { type: ['array', 'null'], items: { type: 'number' }, minItems: 2, maxItems: 2 },
    method: methodSchema,
    regression: { type: 'boolean' },
    reason: { type: 'string' },
  },
} as const;
/** detect.ts, Detection: typed whole, so that a page of 500 verdicts is serialized by compiled code. */
const detectionSchema = {
  type: 'object',
  description: 'History-aware verdict (docs/baselines.md, Regression detection)',
  required: ['method', 'lookback', 'threshold_pct', 'z_threshold', 'head_commit', 'runs_considered', 'regressed', 'regressions', 'fields', 'note'],
  properties: {
    method: methodSchema,
    lookback: { type: 'integer' },
    threshold_pct: { type: 'number' },
    z_threshold: { type: 'number' },
    head_commit: { type: 'string' },
    runs_considered: { type: 'integer' },
    regressed: { type: 'boolean' },
    regressions: { type: 'array', items: { type: 'string' } },
    fields: { type: 'array', items: fieldDetectionSchema },
    note: { type: ['string', 'null'] },
  },
} as const;
const storedSchema = {
  type: 'object',
  required: ['id', 'recorded_at', 'record'],
  properties: { id: { type: 'integer' }, recorded_at: { type: 'string' }, record: { type: 'object', additionalProperties: true }, detection: detectionSchema },
} as const;

/** The comparison report (compare.ts, ComparisonReport): open to the fields it carries per metric. */
const changeSchema = {
  type: 'object',
  additionalProperties: true,
  properties: {
    status: { type: 'string', enum: ['improved', 'worse', 'regressed', 'unchanged', 'missing'] },
    regression: { type: 'boolean' },
    change_pct: { type: ['number', 'null'] },
  },
} as const;
const comparisonSchema = {
  type: 'object',
  additionalProperties: true,
  properties: {
    threshold_pct: { type: 'number' },
    regressed: { type: 'boolean' },
    regressions: { type: 'array', items: { type: 'string' } },
    metrics: { type: 'array', items: changeSchema },
    speedups: { type: 'array', items: changeSchema },
    warnings: { type: 'array', items: { type: 'string' } },
  },
} as const;

const thresholdSchema = {
  type: 'number',
  minimum: 0,
  maximum: MAX_THRESHOLD_PCT,
  default: DEFAULT_THRESHOLD_PCT,
  description: 'Regression threshold in percent',
} as const;
const referenceSchema = { type: 'string', minLength: 1, maxLength: 64, description: 'latest, a record id, or a commit sha' } as const;

/**
 * A run with its verdict costs the limiter this many runs without: what the list's CPU measured
 * (bench/README.md, "Pages with detection"), so that no token's pages hold a core.
 */
export const DETECTION_WEIGHT = 20;

/** Every baseline route takes `ci` tokens too: a CI job pushes and reads baselines, and nothing else. */
const ci = { auth: 'ci' } as const;

export function baselineRoutes(server: FastifyInstance, baselines: BaselineService): void {
  const app = withSchemaTypes(server);
  app.get(
    '/schemas/baseline.schema.json',
    {
      schema: {
        operationId: 'getBaselineSchema',
        tags: ['baselines'],
        summary: 'The baseline record JSON Schema (draft 2020-12)',
        response: { 200: { content: { 'application/schema+json': { schema: { type: 'object', additionalProperties: true } } } } },
      },
    },
    async (_request, reply) => reply.type('application/schema+json').send(baselineSchema),
  );

  app.post(
    '/api/baselines',
    {
      config: ci,
      // Stored as sent (docs/baselines.md), so bounded as sent.
      bodyLimit: BASELINE_RECORD_LIMIT,
      schema: {
        operationId: 'createBaseline',
        tags: ['baselines'],
        summary: 'Record a baseline; answers it with a comparison against the previous run and the history-aware detection',
        description: `The record is stored byte for byte as sent, so it is bounded as sent: at most ${BASELINE_RECORD_LIMIT} bytes (413 above).`,
        body: baselineSchemaForOpenApi,
        querystring: { type: 'object', additionalProperties: false, properties: { threshold: thresholdSchema } },
        response: {
          201: {
            type: 'object',
            // A nullable object rather than anyOf: anyOf makes the serializer validate the answer, and a
            // failure there would be a 500 for a record already stored.
            properties: {
              ...storedSchema.properties,
              comparison: { ...comparisonSchema, type: ['object', 'null'], description: 'Against the previous run; null for the first' },
            },
          },
        },
      },
      // The body is checked as the CLI checks it: the schema file's own compiled draft 2020-12
      // validator, then the run time's range (schema.ts).
      validatorCompiler: ({ schema, httpPart }) => (httpPart === 'body' ? checkRecord : textValidator.compile(schema as object)),
    },
    async (request, reply) => {
      // The body's schema is the shipped JSON file, which TypeScript cannot read: ajv compiles it as a validator of BaselineRecord.
      const record = request.body as BaselineRecord;
      const raw = request.rawBody ? withoutByteOrderMark(request.rawBody.toString('utf8')) : JSON.stringify(record);
      return reply.code(201).send(await baselines.record(record, raw, request.query.threshold));
    },
  );

  app.get(
    '/api/baselines',
    {
      // `before` naming no baseline.
      config: {
        ...ci,
        problems: ['not_found'],
        rateLimit: { scale: perPage(RECORD_PAGE, (query) => (query.detection === 'true' ? DETECTION_WEIGHT : 1)) },
      },
      schema: {
        operationId: 'listBaselines',
        tags: ['baselines'],
        summary: 'Recorded baselines, newest first',
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            limit: pageLimit(RECORD_PAGE),
            before: rowId,
            detection: { type: 'boolean', default: false, description: "Add each run's history-aware verdict" },
            threshold: thresholdSchema,
          },
        },
        response: { 200: { type: 'array', items: storedSchema } },
      },
    },
    (request) => {
      const { limit, before, detection, threshold } = request.query;
      return baselines.list(limit, before, detection ? { thresholdPct: threshold } : undefined);
    },
  );

  app.get(
    '/api/baselines/:id/detection',
    {
      // One verdict reads as much history as a page's (up to 1,100 runs): it costs what a page of 100 with verdicts does.
      config: { ...ci, rateLimit: { scale: () => DETECTION_WEIGHT } },
      schema: {
        operationId: 'getBaselineDetection',
        tags: ['baselines'],
        summary: "A run's history-aware regression verdict against the runs before it (centre, noise band, why)",
        params: rowIdParams,
        querystring: { type: 'object', additionalProperties: false, properties: { threshold: thresholdSchema } },
        response: { 200: detectionSchema },
      },
    },
    (request) => baselines.detect(request.params.id, request.query.threshold),
  );

  app.get(
    '/api/baselines/latest',
    {
      config: { ...ci, problems: ['not_found'] },
      schema: { operationId: 'getLatestBaseline', summary: 'The newest baseline', tags: ['baselines'], response: { 200: storedSchema } },
    },
    () => baselines.latest(),
  );

  app.get(
    '/api/baselines/compare',
    {
      config: { ...ci, problems: ['not_found'] },
      schema: {
        operationId: 'compareBaselines',
        tags: ['baselines'],
        summary: 'Compare two recorded baselines',
        querystring: {
          type: 'object',
          required: ['head'],
          additionalProperties: false,
          properties: { base: { ...referenceSchema, default: 'latest' }, head: referenceSchema, threshold: thresholdSchema },
        },
        response: { 200: { ...comparisonSchema, properties: { ...comparisonSchema.properties, base_id: { type: 'integer' }, head_id: { type: 'integer' } } } },
      },
    },
    (request) => {
      const { base, head, threshold } = request.query;
      return baselines.compare(base, head, threshold);
    },
  );

  app.get(
    '/api/baselines/:id',
    {
      config: ci,
      schema: { operationId: 'getBaseline', summary: 'One baseline', tags: ['baselines'], params: rowIdParams, response: { 200: storedSchema } },
    },
    (request) => baselines.get(request.params.id),
  );
}
