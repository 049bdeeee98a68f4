import { ID_PATTERN_SOURCE } from '../ids.js';

/** JSON Schema fragments shared by route definitions (and so by the OpenAPI document). */

export const idString = { type: 'string', pattern: ID_PATTERN_SOURCE, description: 'Lowercase id: letters, digits, _ and -; at most 64 characters' } as const;
export const nameString = { type: 'string', minLength: 1, maxLength: 200 } as const;

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
