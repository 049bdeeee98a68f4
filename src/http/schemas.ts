import type { FastifyInstance, FastifyTypeProvider } from 'fastify';
import type { JsonSchemaToTsProvider } from '@fastify/type-provider-json-schema-to-ts';
import { ID_PATTERN_SOURCE } from '../ids.js';
import { TEXT_LIMITS } from '../limits.js';

type ValidatedType<Schema> = (JsonSchemaToTsProvider<{ ValidatorSchemaOptions: { parseIfThenElseKeywords: true } }> & { schema: Schema })['validator'];

/**
 * A request's params, query and body typed from the route's own schema by json-schema-to-ts, so no
 * cast restates a schema and drifts from it. Replies stay untyped: a response schema describes the
 * document and the serialization, and what a handler returns is typed by its service.
 */
interface RequestTypesFromSchema extends FastifyTypeProvider {
  validator: ValidatedType<this['schema']>;
  serializer: unknown;
}

/** The server as a route module registers on it (see RequestTypesFromSchema). */
export const withSchemaTypes = (app: FastifyInstance) => app.withTypeProvider<RequestTypesFromSchema>();

/** JSON Schema fragments shared by route definitions (and so by the OpenAPI document). */

export const idString = { type: 'string', pattern: ID_PATTERN_SOURCE, description: 'Lowercase id: letters, digits, _ and -; at most 64 characters' } as const;
/**
 * Names need one visible character: a name of spaces reads as nothing in a list or in Home Assistant.
 * Not visible: white space, controls, the characters Unicode says to draw as nothing (zero-width
 * ones, joiners, bidirectional controls, the Hangul fillers, variation selectors, soft hyphen, BOM),
 * the blank Braille pattern and the interlinear annotation marks. Spelt out as ranges of the Basic
 * Multilingual Plane, because the OpenAPI document carries the pattern and validators outside
 * JavaScript (Python's `re`) know no `\p{...}`; test/input-shape.unit.test.ts holds it to Unicode's
 * properties, and to presence's nameKey (a character is blank exactly when a name's key drops it).
 */
export const NOT_BLANK =
  '[^\\u0000-\\u0020\\u007f-\\u00a0\\u00ad\\u034f\\u061c\\u115f\\u1160\\u1680\\u17b4\\u17b5\\u180b-\\u180f\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u2800\\u3000\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb]';
export const nameString = {
  type: 'string',
  minLength: 1,
  maxLength: TEXT_LIMITS.name,
  pattern: NOT_BLANK,
  description: `At most ${TEXT_LIMITS.name} characters (${4 * TEXT_LIMITS.name} bytes of UTF-8)`,
} as const;

/** The schema keyword bounding a JSON document in bytes of its UTF-8 JSON text (validated in json-body.ts). */
export const MAX_JSON_BYTES = 'x-max-json-bytes';
/** An object of at most `limit` bytes as JSON. */
export const jsonObject = (limit: number, description: string) =>
  ({ type: 'object', [MAX_JSON_BYTES]: limit, description: `${description} At most ${limit} bytes as JSON (UTF-8).` }) as const;

export const idParams = {
  type: 'object',
  required: ['id'],
  properties: { id: idString },
} as const;

export const nullableString = { type: ['string', 'null'] } as const;

/** A 204 answer in a route's schema: no body (the OpenAPI document then declares none). */
export const noContent = (description: string) => ({ 204: { type: 'null', description } }) as const;

/**
 * Row ids and event sequence numbers in paths and query strings. Bounded where a JSON number is
 * still exact (2^53 - 1, below PostgreSQL's bigint limit), so an out-of-range value is a 400 naming
 * the parameter, never a database error.
 */
export const rowId = { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER } as const;
/** A path naming a row by its id (`/:id`). */
export const rowIdParams = { type: 'object', required: ['id'], properties: { id: rowId } } as const;
export const sequenceCursor = { type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER } as const;

export const eventPayloadSchema = {
  type: 'object',
  properties: {
    event_type: { type: 'string' },
    timestamp: { type: 'string', format: 'date-time' },
    zone: nullableString,
    person: nullableString,
    blob_id: nullableString,
    severity: { type: 'string', enum: ['info', 'warning', 'critical'] },
    detail: { type: 'object', additionalProperties: true },
  },
} as const;
