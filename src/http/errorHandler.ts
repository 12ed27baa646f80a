import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { BODY_IDLE_TIMEOUT } from './bodyTimeout.js';
import { RateLimitedError, ServiceError, UnauthorizedError, UnavailableError, ValidationError, type FieldError } from '../domain/errors.js';
import { isConnectionLost, isContention, isEncodingError, isForeignKeyViolation, isStatementTimeout } from '../db/errors.js';
import { problemBody, sendProblem, type ProblemBody } from './problem.js';
import { fieldErrorsOf, type AjvError } from './fieldErrors.js';
import { statusOf } from '../web/errorStatus.js';

function validationDetails(error: FastifyError): FieldError[] {
  return fieldErrorsOf((error.validation ?? []) as unknown as AjvError[], error.validationContext);
}

/**
 * The problem document of a domain error, for an answer that carries problems inside it (a
 * batch's items): the same body, status and members errorHandler sends for it.
 */
export function problemOf(error: ServiceError, docsUrl: string, requestId: string): ProblemBody {
  const extra: Record<string, unknown> = { ...error.extra };
  if (error instanceof ValidationError) extra.errors = error.errors;
  return problemBody(docsUrl, statusOf(error), error.code, error.message, requestId, extra);
}

/**
 * Node's error for a request whose connection closed before its body had all arrived (the request
 * stream's `aborted`, ECONNRESET; the client's doing, or a timeout's of the server's own, which
 * answered first): matched on the error itself, never on the client's
 * state, so that a real failure met while a body was arriving (a lost database connection in a
 * hook, a bug) is reported as what it is even when the client then went away.
 */
export function isClientAbort(error: unknown): boolean {
  return error instanceof Error && (error as { code?: unknown }).code === 'ECONNRESET' && error.message === 'aborted';
}

export function errorHandler(docsUrl: string) {
  return function handle(error: FastifyError | ServiceError | Error, request: FastifyRequest, reply: FastifyReply) {
    if (error instanceof ServiceError) {
      const status = statusOf(error);
      const extra: Record<string, unknown> = { ...error.extra };
      if (error instanceof ValidationError) extra.errors = error.errors;
      if (error instanceof UnauthorizedError) reply.header('www-authenticate', 'Bearer realm="orgdata"');
      if (error instanceof RateLimitedError) reply.header('retry-after', String(error.retryAfterSeconds));
      // A dependency (the object store) is down: worth a retry shortly, not at once.
      if (error instanceof UnavailableError) reply.header('retry-after', '5');
      if (status === 500) request.log.error({ err: error }, 'unmapped domain error');
      if (status === 503) request.log.warn({ err: error.cause }, error.message);
      return sendProblem(request, reply, docsUrl, status, error.code, error.message, extra);
    }
    const fastifyError = error as FastifyError;
    if (fastifyError.validation) {
      const errors = validationDetails(fastifyError);
      const detail = `The request is not valid: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}.`;
      return sendProblem(request, reply, docsUrl, 400, 'invalid_request', detail, { errors });
    }
    switch (fastifyError.code) {
      case BODY_IDLE_TIMEOUT:
        return sendProblem(request, reply, docsUrl, 408, 'request_timeout', fastifyError.message);
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return sendProblem(request, reply, docsUrl, 413, 'payload_too_large', 'The request body is larger than this server accepts.');
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return sendProblem(
          request,
          reply,
          docsUrl,
          415,
          'unsupported_media_type',
          'Send request bodies as JSON with Content-Type: application/json.',
        );
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return sendProblem(request, reply, docsUrl, 400, 'invalid_request', 'The body is empty; send a JSON object.', {
          errors: [{ field: 'body', message: 'must be a JSON object' }],
        });
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return sendProblem(request, reply, docsUrl, 400, 'invalid_request', 'The body is not valid JSON.', {
          errors: [{ field: 'body', message: 'must be valid JSON' }],
        });
    }
    // Database refusals that a racing request or odd input can provoke: never a 500 for them.
    if (isForeignKeyViolation(error)) {
      return sendProblem(
        request,
        reply,
        docsUrl,
        404,
        'not_found',
        'A record this request refers to was deleted meanwhile; nothing was changed.',
      );
    }
    if (isEncodingError(error)) {
      return sendProblem(
        request,
        reply,
        docsUrl,
        400,
        'invalid_request',
        'The request contains characters that cannot be stored (such as NUL).',
      );
    }
    // The database could not serve the request: nothing was written, and a retry shortly may well succeed.
    const unavailable = (log: string, retryAfter: string, detail: string) => {
      request.log.warn({ err: error }, log);
      reply.header('retry-after', retryAfter);
      return sendProblem(request, reply, docsUrl, 503, 'service_unavailable', detail);
    };
    if (isStatementTimeout(error)) {
      // The database is overloaded or a row is locked for long: the transaction rolled back.
      return unavailable('statement timeout', '1', 'The database did not answer in time; nothing was changed. Retry shortly.');
    }
    if (isContention(error)) {
      // Rolled back by PostgreSQL for another request's sake (a deadlock, a serialization failure)
      // more times than a write retries it (inRetriedTransaction), or on a path that does not.
      return unavailable(
        'transaction contention',
        '1',
        'Other requests were changing the same records at the same moment; nothing was changed. Retry shortly.',
      );
    }
    if (isClientAbort(error)) {
      // The connection closed before its body had all arrived: nobody reads this answer, and it says
      // nothing of the database (whose lost connections are ECONNRESET too). Node raises the same
      // error whoever closed it: the client, or a timeout of the server's that answered 408 first.
      request.log.info(
        { err: error },
        'the connection closed before the request body had all arrived (the client left, or a timeout closed it)',
      );
      return sendProblem(request, reply, docsUrl, 400, 'invalid_request', 'The connection closed before the request body had all arrived.');
    }
    if (isConnectionLost(error)) {
      // PostgreSQL is unreachable or dropped the connection mid-request: a transaction that had
      // not committed was rolled back with it. Only a COMMIT lost in flight leaves the outcome
      // unknown, which is what Idempotency-Key retries are for.
      return unavailable(
        'database connection lost',
        '2',
        'The database cannot be reached at the moment. Retry shortly; a POST retried with the same Idempotency-Key is applied at most once.',
      );
    }
    const status = fastifyError.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      // Fastify's other client errors (bad JSON, bad content length, prototype pollution attempts).
      const detail = error instanceof SyntaxError ? 'The body is not valid JSON.' : 'The request could not be read.';
      return sendProblem(request, reply, docsUrl, 400, 'invalid_request', detail, {
        errors: [{ field: 'body', message: detail }],
      });
    }
    request.log.error({ err: error }, 'request failed');
    return sendProblem(
      request,
      reply,
      docsUrl,
      500,
      'internal_error',
      'Something went wrong on our side. Quote the request_id to the operator.',
    );
  };
}
