/**
 * The one error hierarchy of the domain. Domain functions throw these; each transport (the REST
 * API, the dashboard) maps them to its own format in exactly one place. Nothing here knows HTTP.
 */
export interface FieldError {
  field: string;
  message: string;
}

export abstract class ServiceError extends Error {
  /** Stable machine-readable code, shown to API clients. */
  abstract readonly code: string;
  /** Extra members a transport may expose (e.g. `existing_id`). Never internals. */
  readonly extra: Record<string, unknown>;

  constructor(message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.name = new.target.name;
    this.extra = extra;
  }
}

export class ValidationError extends ServiceError {
  readonly code: string;
  constructor(
    readonly errors: FieldError[],
    message = errors.map((e) => `${e.field}: ${e.message}`).join('; '),
    code = 'invalid_request',
  ) {
    super(message);
    this.code = code;
  }

  static field(field: string, message: string): ValidationError {
    return new ValidationError([{ field, message }]);
  }
}

/** A request the domain refuses as malformed that is not about one field (cursor, idempotency key). */
export class BadRequestError extends ServiceError {
  constructor(
    readonly code: 'invalid_cursor' | 'invalid_idempotency_key' | 'invalid_request' | 'size_mismatch',
    message: string,
  ) {
    super(message);
  }
}

export class UnauthorizedError extends ServiceError {
  readonly code = 'unauthorized';
}

export class ForbiddenError extends ServiceError {
  constructor(
    message: string,
    readonly code: 'forbidden' | 'invalid_signature' = 'forbidden',
  ) {
    super(message);
  }
}

export class NotFoundError extends ServiceError {
  readonly code = 'not_found';
}

export class ConflictError extends ServiceError {
  constructor(
    readonly code:
      | 'contact_exists'
      | 'external_id_exists'
      | 'label_exists'
      | 'member_exists'
      | 'idempotency_conflict'
      | 'already_uploaded'
      | 'file_not_ready',
    message: string,
    extra: Record<string, unknown> = {},
  ) {
    super(message, extra);
  }
}

export class GoneError extends ServiceError {
  constructor(
    message: string,
    readonly code: 'upload_url_expired' | 'download_url_expired' = 'upload_url_expired',
  ) {
    super(message);
  }
}

export class PayloadTooLargeError extends ServiceError {
  readonly code = 'payload_too_large';
}

export class UnprocessableError extends ServiceError {
  constructor(
    message: string,
    extra: Record<string, unknown> = {},
    readonly code: 'idempotency_key_reused' | 'duplicate_in_batch' = 'idempotency_key_reused',
  ) {
    super(message, extra);
  }
}

export class RateLimitedError extends ServiceError {
  constructor(
    readonly code: 'rate_limited' | 'quota_exceeded',
    message: string,
    readonly retryAfterSeconds: number,
    extra: Record<string, unknown> = {},
  ) {
    super(message, extra);
  }
}

/**
 * A service the operation needs cannot be reached; nothing was changed. Retry later.
 * `storage_unavailable`: the file store; `service_unavailable`: anything else (the database, the
 * shared counters of sign-in attempts).
 */
export class UnavailableError extends ServiceError {
  constructor(
    message: string,
    cause: unknown,
    readonly code: 'storage_unavailable' | 'service_unavailable' = 'storage_unavailable',
  ) {
    super(message);
    this.cause = cause;
  }
}
