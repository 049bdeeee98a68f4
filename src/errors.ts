/**
 * The errors the domain refuses with, free of any protocol: each has a stable `code` (the API's
 * problem code; docs/api.md lists them) and says what went wrong. The HTTP edge maps them to
 * problem+json in one place (src/http/error-handler.ts), as Fastify's `@fastify/error` keeps one
 * typed registry of its own errors; a room with errors of its own defines them as factories over
 * `DomainError` beside its code.
 */

/** One offending field: a JSON Pointer (`/replay/events/0/t`) and what is wrong with it. */
export interface FieldError {
  path: string;
  message: string;
}

export interface DomainErrorDetails {
  /** The offending fields, each named. */
  errors?: FieldError[];
  /** When asking again can succeed (a budget being freed, a bucket refilling). */
  retryAfterSeconds?: number;
  /** The policies a refusal exceeded (a rate-limit group, a quota's window). */
  violatedPolicies?: string[];
}

export class DomainError extends Error {
  readonly errors?: FieldError[];
  readonly retryAfterSeconds?: number;
  readonly violatedPolicies?: string[];

  constructor(
    readonly code: string,
    detail: string,
    details: DomainErrorDetails = {},
  ) {
    // A refusal is an answer, not a fault to trace: no stack is captured (a measured share of a refusal's cost).
    const stackTraceLimit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(detail);
    Error.stackTraceLimit = stackTraceLimit;
    this.errors = details.errors;
    this.retryAfterSeconds = details.retryAfterSeconds;
    this.violatedPolicies = details.violatedPolicies;
  }
}

export const notFound = (what: string, id: string) => new DomainError('not_found', `${what} "${id}" does not exist`);
export const invalid = (path: string, message: string) => new DomainError('validation_failed', `${path}: ${message}`, { errors: [{ path, message }] });
export const invalidFields = (errors: FieldError[]) =>
  new DomainError('validation_failed', errors.map((error) => `${error.path} ${error.message}`).join('; '), { errors });
export const conflict = (detail: string) => new DomainError('conflict', detail);
