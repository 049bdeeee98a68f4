import { NOT_BLANK } from './schemas.js';
import { ID_PATTERN_SOURCE } from '../ids.js';
import { DomainError, type FieldError } from '../errors.js';
import { BASELINE_RECORD_LIMIT, BODY_LIMIT, ENRICHMENT_REQUEST_LIMIT } from '../limits.js';

export type { FieldError };

/** RFC 9457 problem details: the one error shape of the whole API, `type` always `/problems/<code>`. */

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: ProblemCode;
  errors?: FieldError[];
  /** draft-ietf-httpapi-ratelimit-headers-10 section 4: the RateLimit policies a 429 exceeded. */
  'violated-policies'?: string[];
}

/**
 * Every problem the API answers, in one table (as Fastify's lib/errors.js): a misspelt code does not
 * compile, and the status, the title, the `/problems/<code>` page and the OpenAPI error schema all
 * come from here.
 */
export const PROBLEMS = {
  validation_failed: {
    status: 400,
    title: 'Validation failed',
    description:
      'The request body, query string or a path parameter broke a rule; `errors` lists each field as a JSON Pointer (`path`) with what is wrong (`message`).',
  },
  bad_request: { status: 400, title: 'Bad request', description: 'The request could not be read: malformed HTTP, JSON or URL encoding.' },
  unauthorized: {
    status: 401,
    title: 'Unauthorized',
    description:
      'Credentials are missing or wrong. Admin routes take `Authorization: Bearer <token>` or the dashboard session; bot routes take the four X-Bot headers (docs/enrichment.md). `WWW-Authenticate` names the scheme.',
  },
  forbidden: {
    status: 403,
    title: 'Forbidden',
    description: 'The credentials are valid but the request is refused, e.g. a cross-site request carrying the dashboard cookie.',
  },
  not_found: { status: 404, title: 'Not found', description: 'No route for this path, or the named resource does not exist.' },
  match_not_found: { status: 404, title: 'Match not found', description: 'The match named in an enrichment request does not exist.' },
  method_not_allowed: { status: 405, title: 'Method not allowed', description: 'The path exists but not for this method; `Allow` lists the methods it takes.' },
  request_timeout: { status: 408, title: 'Request timeout', description: 'The request did not arrive in time.' },
  conflict: {
    status: 409,
    title: 'Conflict',
    description:
      'The request conflicts with the current state: an id already taken, MQTT not connected for a discovery publish, no webhook URL for a redelivery.',
  },
  node_limit_reached: {
    status: 409,
    title: 'Node limit reached',
    description:
      "A heartbeat from a node not yet registered, while the installation has NODE_LIMIT nodes (nodes register themselves on their first heartbeat). Delete nodes no longer in use (`DELETE /api/nodes/{id}`, the dashboard's Nodes page) or raise NODE_LIMIT; known nodes keep reporting.",
  },
  person_limit_reached: {
    status: 409,
    title: 'Person limit reached',
    description:
      "A new person while the installation has PERSON_LIMIT people. Delete people no longer in use (`DELETE /api/persons/{id}`, the dashboard's People page) or raise PERSON_LIMIT.",
  },
  zone_limit_reached: {
    status: 409,
    title: 'Zone limit reached',
    description:
      "A new zone while the installation has ZONE_LIMIT zones. Delete zones no longer in use (`DELETE /api/zones/{id}`, *Delete* on the zone's page in the dashboard) or raise ZONE_LIMIT.",
  },
  match_not_completed: { status: 409, title: 'Match not completed', description: 'Commentary is only requested for completed matches.' },
  replay_unusable: {
    status: 409,
    title: 'Replay unusable',
    description:
      "Commentary is written from the match's replay document and this match has none the worker can read; set one with `PATCH /api/matches/{id}` first. The refused request does not count against the daily quota.",
  },
  replay_invalid: {
    status: 400,
    title: 'Replay invalid',
    description:
      "The match's stored replay breaks the rule the worker reads replays by (one stored before that rule, e.g. an event time beyond today's bound), so the job could only fail; `errors` names the field in the match (`/replay/events/0/t`). Correct it with `PATCH /api/matches/{id}`. The refused request does not count against the daily quota.",
  },
  payload_too_large: {
    status: 413,
    title: 'Payload too large',
    description: `The body exceeds its limit in bytes: ${BODY_LIMIT}, a baseline record ${BASELINE_RECORD_LIMIT}, an enrichment request ${ENRICHMENT_REQUEST_LIMIT}.`,
  },
  uri_too_long: { status: 414, title: 'URI too long', description: 'The request target is too long.' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type', description: 'Bodies are `application/json`.' },
  rate_limited: {
    status: 429,
    title: 'Too many requests',
    description:
      "The token bucket of this route group is empty. Wait `Retry-After` seconds; the `RateLimit` and `RateLimit-Policy` fields (draft-ietf-httpapi-ratelimit-headers-10) say how much is left. `violated-policies` names the exceeded policy, as the draft's registered problem type https://iana.org/assignments/http-problem-types#quota-exceeded does.",
  },
  quota_exceeded: {
    status: 429,
    title: 'Quota exceeded',
    description:
      'The bot has used its 5 enrichment requests of the last 24 hours. `Retry-After` says when the oldest leaves the window; `violated-policies` is ["daily"] (the registered problem type https://iana.org/assignments/http-problem-types#quota-exceeded has the same meaning).',
  },
  too_many_streams: {
    status: 429,
    title: 'Too many event streams',
    description:
      'This client (its token, or its address with the dashboard session) has EVENT_STREAMS_PER_CLIENT event streams open on this instance. Close one, or wait `Retry-After` seconds. (When the instance serves EVENT_STREAMS_MAX streams in all, a new one gets 503 `service_unavailable`.)',
  },
  headers_too_large: { status: 431, title: 'Request header fields too large', description: 'The request headers exceed 16 KiB.' },
  internal_error: { status: 500, title: 'Internal error', description: "The server failed; the log has the cause. Not your request's fault." },
  bad_gateway: {
    status: 502,
    title: 'Upstream failure',
    description: 'A service the request had to reach (the MQTT broker) could not be reached or refused; `detail` says why.',
  },
  service_unavailable: {
    status: 503,
    title: 'Service unavailable',
    description: 'A backing service (database, Redis) is briefly away or the server is shutting down. Retry after `Retry-After` seconds.',
  },
  storage_full: {
    status: 503,
    title: 'Storage budget reached',
    description:
      'The event log and the webhook delivery log are at `STORAGE_BUDGET_MB` while their oldest rows are being deleted; nothing was written. Retry after `Retry-After` seconds.',
  },
} as const satisfies Record<string, { status: number; title: string; description: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

export function isProblemCode(value: string): value is ProblemCode {
  return Object.hasOwn(PROBLEMS, value);
}

/**
 * The code for a status raised by Fastify itself (not by our own code): `bad_request` for a 400 (JSON,
 * a body or a URL it could not read: no field to name), else the first of the table with that status.
 */
export function codeForStatus(status: number): ProblemCode {
  if (status === 400) return 'bad_request';
  const code = (Object.keys(PROBLEMS) as ProblemCode[]).find((candidate) => PROBLEMS[candidate].status === status);
  return code ?? (status >= 500 ? 'internal_error' : 'bad_request');
}

/**
 * A refusal only the HTTP shell can make (malformed framing, credentials, a media type): a domain
 * error whose code is a problem code, with the response headers it needs (a challenge).
 */
export class ProblemError extends DomainError {
  declare readonly code: ProblemCode;

  constructor(
    code: ProblemCode,
    detail: string,
    errors?: FieldError[],
    /** Extra response headers, e.g. WWW-Authenticate. */
    readonly headers: Record<string, string> = {},
    extensions: Pick<Problem, 'violated-policies'> = {},
  ) {
    super(code, detail, { errors, violatedPolicies: extensions['violated-policies'] });
  }
}

export function problem(code: ProblemCode, detail: string, errors?: FieldError[]): Problem {
  const { status, title } = PROBLEMS[code];
  return { type: `/problems/${code}`, title, status, detail, code, ...(errors ? { errors } : {}) };
}

interface AjvLikeError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** Turns Ajv errors into one `{path, message}` per violation, the path pointing at the offending field. */
export function fieldErrors(errors: readonly AjvLikeError[], prefix = ''): FieldError[] {
  const result: FieldError[] = [];
  for (const error of errors) {
    let path = prefix + error.instancePath;
    let message = error.message ?? 'is invalid';
    if (error.keyword === 'required') {
      path += '/' + String(error.params.missingProperty);
      message = 'is required';
    } else if (error.keyword === 'additionalProperties') {
      path += '/' + String(error.params.additionalProperty);
      message = 'is not an allowed property';
    } else if (error.keyword === 'enum') {
      // Ajv says only "must be equal to one of the allowed values": name them, so the fix is in the answer.
      message = `must be one of ${(error.params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(', ')}`;
    } else if (error.keyword === 'pattern' && error.params.pattern === NOT_BLANK) {
      message = 'must not be blank';
    } else if (error.keyword === 'pattern' && error.params.pattern === ID_PATTERN_SOURCE) {
      // The pattern itself means nothing to the person who typed a user name or an id into a form.
      message = 'must be lowercase letters a-z, digits, - and _, starting with a letter or digit (at most 64)';
    } else if (error.keyword === 'minLength') {
      message = error.params.limit === 1 ? 'must not be empty' : `must be at least ${String(error.params.limit)} characters`;
    } else if (error.keyword === 'maxLength') {
      message = `must be at most ${String(error.params.limit)} characters`;
    } else if (error.keyword === 'if') {
      continue; // the failing `then` branch already names the field
    }
    path ||= '/';
    // Ajv can report one violation twice (allOf branches); lists are short, a scan is cheapest.
    if (!result.some((entry) => entry.path === path && entry.message === message)) result.push({ path, message });
  }
  return result;
}
