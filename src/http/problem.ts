/** RFC 9457 problem details: the one error shape of the whole API (CONTRACT section 0). */
export interface FieldError {
  path: string;
  message: string;
}

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  errors?: FieldError[];
}

const TITLES: Record<string, string> = {
  validation_failed: 'Validation failed',
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  not_found: 'Not found',
  conflict: 'Conflict',
  rate_limited: 'Too many requests',
  quota_exceeded: 'Quota exceeded',
  match_not_found: 'Match not found',
  match_not_completed: 'Match not completed',
  payload_too_large: 'Payload too large',
  bad_request: 'Bad request',
  headers_too_large: 'Request header fields too large',
  request_timeout: 'Request timeout',
  uri_too_long: 'URI too long',
  unsupported_media_type: 'Unsupported media type',
  method_not_allowed: 'Method not allowed',
  bad_gateway: 'Upstream failure',
  service_unavailable: 'Service unavailable',
  internal_error: 'Internal error',
};

export class ProblemError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
    readonly errors?: FieldError[],
    /** Extra response headers, e.g. Retry-After. */
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
  }

  toProblem(): Problem {
    return problem(this.status, this.code, this.message, this.errors);
  }
}

export function problem(status: number, code: string, detail: string, errors?: FieldError[]): Problem {
  return { type: `/problems/${code}`, title: TITLES[code] ?? code, status, detail, code, ...(errors ? { errors } : {}) };
}

export const notFound = (what: string, id: string) => new ProblemError(404, 'not_found', `${what} "${id}" does not exist`);
export const invalid = (path: string, message: string) =>
  new ProblemError(400, 'validation_failed', `${path}: ${message}`, [{ path, message }]);
export const conflict = (detail: string) => new ProblemError(409, 'conflict', detail);

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
    } else if (error.keyword === 'if') {
      continue; // the failing `then` branch already names the field
    }
    path ||= '/';
    // Ajv can report one violation twice (allOf branches); lists are short, a scan is cheapest.
    if (!result.some((entry) => entry.path === path && entry.message === message)) result.push({ path, message });
  }
  return result;
}
