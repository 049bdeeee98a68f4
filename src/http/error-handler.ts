import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../errors.js';
import { isUnavailable, storageFailure } from '../db/index.js';
import { unsupportedMediaType } from './json-body.js';
import { codeForStatus, fieldErrors, isProblemCode, problem, ProblemError, type Problem } from './problem.js';

/** A database that cannot write for lack of disk is not back in 5 s: it waits for someone to free space. */
const STORAGE_RETRY_AFTER_SECONDS = '30';

/**
 * A unique key another request took at the same moment (PostgreSQL unique_violation, SQLite's
 * constraint codes): a 409, never a 500. Services insert with `on conflict` and answer their own
 * 409 naming the id; this is the backstop for a write that does not.
 */
const UNIQUE_VIOLATION_CODES = new Set(['23505', 'SQLITE_CONSTRAINT_PRIMARYKEY', 'SQLITE_CONSTRAINT_UNIQUE']);

type RequestError = FastifyError & { validation?: unknown[]; validationContext?: string };

const send = (reply: FastifyReply, body: Problem) => reply.code(body.status).type('application/problem+json').send(body);

/** The one place a domain error becomes an HTTP answer: its code is the problem code. */
function sendDomainError(error: DomainError, request: FastifyRequest, reply: FastifyReply) {
  if (!isProblemCode(error.code)) return sendFailure(error as unknown as RequestError, request, reply);
  const body: Problem = problem(error.code, error.message, error.errors);
  if (error.violatedPolicies) body['violated-policies'] = error.violatedPolicies;
  if (error instanceof ProblemError) reply.headers(error.headers);
  if (error.retryAfterSeconds !== undefined) reply.header('retry-after', String(error.retryAfterSeconds));
  return send(reply, body);
}

/** Schema validation: every violation, each field named. */
function sendValidationError(error: RequestError, reply: FastifyReply) {
  const where = error.validationContext === 'body' ? '' : `${error.validationContext}:`;
  const errors = fieldErrors(error.validation as Parameters<typeof fieldErrors>[0], where);
  const detail = errors.map((entry) => `${entry.path} ${entry.message}`).join('; ');
  return send(reply, problem('validation_failed', detail, errors));
}

/** Everything else: a backing service away or out of disk (503), a key taken concurrently (409), Fastify's own 4xx, or a 500. */
function sendFailure(error: RequestError, request: FastifyRequest, reply: FastifyReply) {
  const storage = storageFailure(error);
  if (storage) {
    request.server.throttledLog.storageFailure(request.log, error);
    reply.header('retry-after', STORAGE_RETRY_AFTER_SECONDS);
    return send(reply, problem('service_unavailable', `The database cannot write (${storage}); try again later`));
  }
  if (isUnavailable(error)) {
    request.server.throttledLog.write(request.log, 'unavailable', 'warn', { req: request, err: error }, 'backing service unavailable');
    reply.header('retry-after', '5');
    return send(reply, problem('service_unavailable', 'A backing service is unavailable; try again shortly'));
  }
  if (UNIQUE_VIOLATION_CODES.has(String(error.code))) {
    request.log.warn({ req: request, err: error }, 'unique key taken by a concurrent write');
    return send(reply, problem('conflict', 'A record with the same key was written at the same time; read the current state and retry'));
  }
  const status = error.statusCode && error.statusCode >= 400 && error.statusCode < 500 ? error.statusCode : 500;
  if (status >= 500) {
    // At info this is the only line of the request (the access log is debug's): it names it.
    request.log.error({ req: request, err: error }, 'request failed');
    return send(reply, problem('internal_error', 'The server could not complete the request'));
  }
  return send(
    reply,
    problem(
      codeForStatus(status),
      status === 413
        ? `Request body exceeds ${request.routeOptions.bodyLimit} bytes`
        : status === 415
          ? unsupportedMediaType(request.headers['content-type'])
          : error.message,
    ),
  );
}

/** problem+json for every failure of a request, whoever raised it. */
export function errorHandler(app: FastifyInstance): void {
  app.setErrorHandler((error: RequestError, request, reply) => {
    if (error instanceof DomainError) return sendDomainError(error, request, reply);
    if (error.validation) return sendValidationError(error, reply);
    return sendFailure(error, request, reply);
  });
}
