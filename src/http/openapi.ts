import type { FastifyContextConfig, FastifySchema } from 'fastify';
import { ROUTE_ACCESS } from './auth.js';
import { PROBLEMS, type ProblemCode } from './problem.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Problems this route answers beyond the ones every route of its kind can (see `errorCodes`):
     * what the handler itself throws, e.g. `conflict` for an id already taken.
     */
    problems?: ProblemCode[];
  }
}

/** RFC 9457 problem details with our `code` and field `errors`: the one error body of the API. */
export const PROBLEM_SCHEMA = {
  $id: 'Problem',
  type: 'object',
  required: ['type', 'title', 'status', 'detail', 'code'],
  properties: {
    type: { type: 'string', description: '/problems/<code>, which resolves to a description of the problem' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string', description: 'What went wrong with this request' },
    code: { type: 'string', enum: Object.keys(PROBLEMS) },
    errors: {
      type: 'array',
      description: 'One entry per invalid field: a JSON Pointer into the body, or querystring:/... and params:/...',
      items: { type: 'object', required: ['path', 'message'], properties: { path: { type: 'string' }, message: { type: 'string' } } },
    },
    'violated-policies': {
      type: 'array',
      items: { type: 'string' },
      description: 'On a 429: the RateLimit policies exceeded (draft-ietf-httpapi-ratelimit-headers-10)',
    },
  },
} as const;

const RATE_LIMIT_HEADERS = {
  'Retry-After': { type: 'integer', description: 'Seconds until a request of this cost can pass' },
  RateLimit: { type: 'string', description: 'Structured field: "<policy>";r=<requests left>;t=<seconds until another can pass>' },
  'RateLimit-Policy': { type: 'string', description: 'Structured field: "<policy>";q=<requests per window>;w=<window in seconds>' },
};

const BODYLESS_METHODS = new Set(['GET', 'HEAD']);

/**
 * The problems a route can answer, from what it is (its auth, its inputs, its limit) plus what it
 * declares itself: one rule, so the document cannot forget a 401 on a new admin route.
 */
export function errorCodes(method: string, url: string, schema: FastifySchema | undefined, config: Partial<FastifyContextConfig> | undefined): ProblemCode[] {
  const codes = new Set<ProblemCode>(config?.problems ?? []);
  const access = config?.auth ? ROUTE_ACCESS[config.auth] : { admin: false, bot: false };
  if (access.admin || access.bot) codes.add('unauthorized');
  // The session cookie on a cross-site request.
  if (access.admin) codes.add('forbidden');
  // Any request: HTTP, a URL or JSON the server cannot read, header fields beyond Node's limit, and a
  // query key no route takes (NUL, `__proto__`), checked before the route's own schema.
  codes.add('bad_request').add('headers_too_large').add('validation_failed');
  // A body is read, and refused, whether or not the route takes one.
  if (!BODYLESS_METHODS.has(method)) codes.add('payload_too_large').add('unsupported_media_type');
  if (schema?.params) codes.add('not_found').add('uri_too_long');
  if (config?.rateLimit !== false) codes.add('rate_limited');
  // Every API route reads or writes the database; a limited route also needs the rate-limit store.
  if (url.startsWith('/api/') || config?.rateLimit !== false) codes.add('service_unavailable');
  // Any API write may append an event, which the storage budget can refuse for a moment.
  if (url.startsWith('/api/')) codes.add('storage_full');
  return [...codes];
}

/** The OpenAPI response objects for `codes`: one per status, problem+json, with Retry-After and RateLimit on 429s. */
export function problemResponses(codes: ProblemCode[]): Record<string, unknown> {
  const byStatus = new Map<number, ProblemCode[]>();
  for (const code of codes) byStatus.set(PROBLEMS[code].status, [...(byStatus.get(PROBLEMS[code].status) ?? []), code]);
  return Object.fromEntries(
    [...byStatus].map(([status, sameStatus]) => [
      status,
      {
        description: sameStatus.map((code) => `\`${code}\`: ${PROBLEMS[code].title}`).join('; '),
        content: { 'application/problem+json': { schema: { $ref: 'Problem#' } } },
        ...(status === 429 ? { headers: RATE_LIMIT_HEADERS } : status === 503 ? { headers: { 'Retry-After': RATE_LIMIT_HEADERS['Retry-After'] } } : {}),
      },
    ]),
  );
}

const isPlainObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * A route's own response schemas as the document shows them: an object schema without a `required`
 * list has every property required, because an answer carries all its fields (null when empty) and a
 * generated client should not have to check each. A schema with a field that is sometimes left out
 * lists its `required` fields itself. The document's copy only: serialization is untouched.
 */
export function requireAnsweredFields<T>(schema: T): T {
  if (Array.isArray(schema)) return schema.map(requireAnsweredFields) as T;
  if (!isPlainObject(schema)) return schema;
  const result = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, requireAnsweredFields(value)]));
  if (isPlainObject(result.properties) && result.required === undefined && [result.type ?? 'object'].flat().includes('object'))
    result.required = Object.keys(result.properties);
  return result as T;
}
