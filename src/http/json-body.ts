import { isUtf8 } from 'node:buffer';
import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { Ajv, str, type ErrorObject } from 'ajv';
import addFormats from 'ajv-formats';
import { jsonShapeError } from './input-shape.js';
import { MAX_JSON_BYTES } from './schemas.js';
import { ProblemError } from './problem.js';
import { DomainError, invalid } from '../errors.js';
import { jsonBytes } from '../limits.js';

// Bodies are validated without coercion (a "5" is not a 5); query strings and path params are text, so they are coerced.
const bodyValidator = new Ajv({ allErrors: true, coerceTypes: false, removeAdditional: false, useDefaults: true, strict: false });
export const textValidator = new Ajv({ allErrors: true, coerceTypes: 'array', removeAdditional: false, useDefaults: true, strict: false });
addFormats.default(bodyValidator);
/** A JSON document's size bound in bytes of its UTF-8 JSON text (src/limits.ts, `JSON_LIMITS`). */
bodyValidator.addKeyword({
  keyword: MAX_JSON_BYTES,
  schemaType: 'number',
  validate: (limit: number, data: unknown) => jsonBytes(data) <= limit,
  error: { message: ({ schemaCode }) => str`must be at most ${schemaCode} bytes as JSON` },
});
addFormats.default(textValidator);

/**
 * Compiles a route part's schema at its first request rather than at start-up: compiling every
 * route's schemas was the largest share of start-up CPU, and most routes wait long for a first call.
 */
function compileOnFirstUse(validator: Ajv, schema: object) {
  let compiled: ReturnType<Ajv['compile']> | null = null;
  const validate = (data: unknown): boolean => {
    compiled ??= validator.compile(schema);
    const valid = compiled(data) as boolean;
    validate.errors = compiled.errors;
    return valid;
  };
  validate.errors = null as ErrorObject[] | null | undefined;
  return validate;
}

/**
 * Why a body the JSON parser refused is still well-formed JSON: a prototype-poisoning key, named with
 * its path (the parser's own error says only "not valid JSON"). Runs on refused bodies only.
 */
function poisonedJsonError(body: Buffer): DomainError | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  const shapeError = jsonShapeError(parsed);
  return shapeError && invalid(shapeError.path, shapeError.message);
}

/** A 415's detail: what was refused and what to send instead (Fastify's own message says neither). */
export function unsupportedMediaType(contentType: string | undefined): string {
  const got = contentType ? `Content-Type ${contentType.slice(0, 80)} is not accepted` : 'A body without Content-Type is not accepted';
  return `${got}: send the body as JSON in UTF-8 with Content-Type: application/json`;
}

/** JSON is UTF-8 (RFC 8259): a body declared in another charset would be read as something else. */
function charsetError(contentType: string | undefined): ProblemError | undefined {
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType ?? '')?.[1]?.toLowerCase();
  if (!charset || charset === 'utf-8' || charset === 'utf8') return undefined;
  return new ProblemError('unsupported_media_type', unsupportedMediaType(contentType));
}

/**
 * The API speaks JSON only, validated strictly: any other body is a 415, not a string that fails
 * validation later; the raw body is kept for signatures; the input-shape rules (no poisoning keys,
 * no NUL) apply to bodies, query strings and path parameters alike.
 */
export function jsonBodies(app: FastifyInstance): void {
  app.setValidatorCompiler(({ schema, httpPart }) => compileOnFirstUse(httpPart === 'body' ? bodyValidator : textValidator, schema as object));
  app.removeContentTypeParser('text/plain');
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    request.rawBody = body as Buffer;
    const refusedCharset = charsetError(request.headers['content-type']);
    if (refusedCharset) return done(refusedCharset);
    // Generic clients send `Content-Type: application/json` on every request, a bodyless DELETE too:
    // an empty body where the route takes none is no body, not malformed JSON.
    if ((body as Buffer).length === 0 && !request.routeOptions.schema?.body) return done(null, undefined);
    // Bodies are read as sent: a compressed one would be refused as "not UTF-8", or a `br` label on plain JSON ignored.
    const encoding = request.headers['content-encoding'];
    if (encoding && encoding.split(',').some((coding) => !['', 'identity'].includes(coding.trim().toLowerCase())))
      return done(new ProblemError('unsupported_media_type', `Content-Encoding ${encoding.slice(0, 40)} is not accepted: send the body uncompressed`));
    // Decoding would replace each stray byte with U+FFFD, and the name stored would not be the one sent.
    if (!isUtf8(body as Buffer)) return done(new ProblemError('bad_request', 'The body is not valid UTF-8: send JSON in UTF-8 (RFC 8259)'));
    void parseJson(request, body as unknown as string, (error, parsed) => {
      if (error) return done(poisonedJsonError(body as Buffer) ?? error);
      const shapeError = jsonShapeError(parsed);
      done(shapeError ? invalid(shapeError.path, shapeError.message) : null, parsed);
    });
  });
  // Query strings and path parameters are text: the same NUL rule, before validation coerces them.
  app.addHook('preValidation', (request, _reply, done) => {
    if (!readableQuery(request.url))
      return done(new ProblemError('bad_request', 'The query string is not valid URL encoding (a % must start the UTF-8 bytes of a character)'));
    const shapeError = jsonShapeError(request.query, 'querystring:') ?? jsonShapeError(request.params, 'params:');
    done(shapeError ? invalid(shapeError.path, shapeError.message) : undefined);
  });
  // A route that reads numbers from its URL checks their text first, its own hook: none on the others.
  app.addHook('onRoute', (route) => {
    const fields = numberFields(route.schema);
    if (fields.length > 0) route.preValidation = [...[route.preValidation ?? []].flat(), decimalText(fields)];
  });
}

/**
 * Whether the URL's query string decodes: the query parser keeps a malformed escape (`%ff`, `%zz`) as
 * its text, which a route would then look up as a name or a commit; the router refuses one in a path.
 */
function readableQuery(url: string): boolean {
  const start = url.indexOf('?');
  if (start < 0 || !url.includes('%', start)) return true;
  try {
    decodeURIComponent(url.slice(start + 1));
    return true;
  } catch {
    return false;
  }
}

interface NumberField {
  part: 'querystring' | 'params';
  name: string;
  integer: boolean;
}

/** The query and path fields a route's schema reads as numbers. */
function numberFields(schema: FastifySchema | undefined): NumberField[] {
  return (['querystring', 'params'] as const).flatMap((part) =>
    Object.entries((schema?.[part] as { properties?: Record<string, { type?: unknown }> } | undefined)?.properties ?? {})
      .filter(([, field]) => field.type === 'integer' || field.type === 'number')
      .map(([name, field]) => ({ part, name, integer: field.type === 'integer' })),
  );
}

const DECIMAL_INTEGER = /^-?\d+$/;
const DECIMAL_NUMBER = /^-?\d+(\.\d+)?$/;

/**
 * Numbers in a URL are decimal: the schemas' type coercion would also read ' ' as 0 (an event cursor
 * replaying the whole log), and '0x10', '1e3', '+1' or '1.0' as numbers, so a client's mistake would
 * be answered as if it had asked for something else.
 */
function decimalText(fields: NumberField[]) {
  return (request: FastifyRequest, _reply: unknown, done: (error?: Error) => void): void => {
    for (const { part, name, integer } of fields) {
      const value = (part === 'querystring' ? request.query : request.params) as Record<string, unknown>;
      for (const text of [value[name] ?? []].flat())
        if (typeof text === 'string' && !(integer ? DECIMAL_INTEGER : DECIMAL_NUMBER).test(text))
          return done(invalid(`${part}:/${name}`, integer ? 'must be a decimal integer' : 'must be a decimal number'));
    }
    done();
  };
}
