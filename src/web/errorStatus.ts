import {
  BadRequestError,
  ConflictError,
  ForbiddenError,
  GoneError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitedError,
  UnauthorizedError,
  UnavailableError,
  UnprocessableError,
  ValidationError,
  type ServiceError,
} from '../domain/errors.js';

/**
 * HTTP status of each domain error: the one mapping from the domain's errors to HTTP, used by the
 * API's problem documents (http/errorHandler.ts) and the dashboard's error pages alike.
 */
export function statusOf(error: ServiceError): number {
  if (error instanceof ValidationError || error instanceof BadRequestError) return 400;
  if (error instanceof UnauthorizedError) return 401;
  if (error instanceof ForbiddenError) return 403;
  if (error instanceof NotFoundError) return 404;
  if (error instanceof ConflictError) return 409;
  if (error instanceof GoneError) return 410;
  if (error instanceof PayloadTooLargeError) return 413;
  if (error instanceof UnprocessableError) return 422;
  if (error instanceof RateLimitedError) return 429;
  if (error instanceof UnavailableError) return 503;
  return 500;
}
