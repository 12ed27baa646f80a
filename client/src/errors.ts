import { parseJson } from './json.js';
import type { Problem, ProblemFieldError, ProblemQuota } from './types.js';

/**
 * Every `code` the API sends (a test compares this list with the server's own). The problem
 * document's schema types `code` as a string, so the list lives here to make `e.code` a union.
 */
export const API_ERROR_CODES = [
  'invalid_request',
  'invalid_cursor',
  'invalid_idempotency_key',
  'size_mismatch',
  'unauthorized',
  'forbidden',
  'invalid_signature',
  'not_found',
  'method_not_allowed',
  'request_timeout',
  'idempotency_conflict',
  'contact_exists',
  'external_id_exists',
  'label_exists',
  'member_exists',
  'already_uploaded',
  'file_not_ready',
  'contact_erased',
  'upload_url_expired',
  'download_url_expired',
  'payload_too_large',
  'uri_too_long',
  'unsupported_media_type',
  'duplicate_in_batch',
  'idempotency_key_reused',
  'rate_limited',
  'quota_exceeded',
  'headers_too_large',
  'internal_error',
  'service_unavailable',
  'storage_unavailable',
] as const;

export type ApiErrorCode = (typeof API_ERROR_CODES)[number];

/**
 * Codes of failures the client itself detects (no problem document came back):
 * - `connection_error`: the request or its response was cut off (after every retry);
 * - `timeout`: no complete response within `timeout` (after every retry);
 * - `aborted`: the caller's `signal` aborted the call;
 * - `unexpected_response`: an answer that is not what the API sends (not JSON, a redirect, …);
 * - `upload_not_replayable`: a stream body was already read and its upload must be sent again.
 */
export type ClientErrorCode = 'connection_error' | 'timeout' | 'aborted' | 'unexpected_response' | 'upload_not_replayable';

export type OrgdataErrorCode = ApiErrorCode | ClientErrorCode;

export interface OrgdataErrorInit {
  code: OrgdataErrorCode;
  message: string;
  status?: number;
  title?: string;
  detail?: string;
  requestId?: string;
  type?: string;
  errors?: ProblemFieldError[];
  quota?: ProblemQuota;
  existingId?: string | null;
  missingIds?: string[];
  index?: number;
  retryAfter?: number;
  cause?: unknown;
}

/**
 * The one error the client throws for an API call. `code` is a union, so
 * `if (e instanceof OrgdataError && e.code === 'contact_exists') e.existingId` is typed.
 * It never carries the API key: not in its message, its fields or its cause.
 */
export class OrgdataError extends Error {
  override readonly name = 'OrgdataError';
  readonly code: OrgdataErrorCode;
  /** The HTTP status; undefined when no response came back (`connection_error`, `timeout`, `aborted`). */
  readonly status: number | undefined;
  readonly title: string | undefined;
  readonly detail: string | undefined;
  /** The `request_id` of the problem (or the `Request-Id` header): quote it to the operator. */
  readonly requestId: string | undefined;
  /** The problem's `type`: a link to the code in the error reference. */
  readonly type: string | undefined;
  /** With `invalid_request`: every refused field and why. */
  readonly errors: ProblemFieldError[] | undefined;
  /** With `quota_exceeded`: the organisation's daily allowance and when it resets. */
  readonly quota: ProblemQuota | undefined;
  /** With `contact_exists`, `external_id_exists` and `label_exists`: the record that already has that value. */
  readonly existingId: string | null | undefined;
  /** With an atomic `contacts.batch` that failed: the item that failed (nothing was written). */
  readonly index: number | undefined;
  /** With `not_found` when adding group members: the contact ids that are not in the organisation. */
  readonly missingIds: string[] | undefined;
  /** `Retry-After` in seconds, when the response had one (429, 503). */
  readonly retryAfter: number | undefined;

  constructor(init: OrgdataErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.title = init.title;
    this.detail = init.detail;
    this.requestId = init.requestId;
    this.type = init.type;
    this.errors = init.errors;
    this.quota = init.quota;
    this.existingId = init.existingId;
    this.missingIds = init.missingIds;
    this.index = init.index;
    this.retryAfter = init.retryAfter;
  }

  /** The fields of the error, for logs: `JSON.stringify(error)` shows them too. */
  toJSON(): Record<string, unknown> {
    return {
      name: this.name,
      message: this.message,
      code: this.code,
      status: this.status,
      title: this.title,
      detail: this.detail,
      requestId: this.requestId,
      type: this.type,
      errors: this.errors,
      quota: this.quota,
      existingId: this.existingId,
      missingIds: this.missingIds,
      index: this.index,
      retryAfter: this.retryAfter,
    };
  }
}

/** Thrown by `Orgdata.webhooks.verify` when a delivery's signature or timestamp does not check out. */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
}

/** `Retry-After` in seconds (the API sends whole seconds; an HTTP date is accepted too). */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, Math.ceil((date - now) / 1000));
}

/** An OrgdataError from an error response of `METHOD path` (its body already read as text). */
export function errorFromResponse(what: string, response: Response, text: string): OrgdataError {
  const requestId = response.headers.get('request-id') ?? undefined;
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
  let problem: Partial<Problem> | undefined;
  try {
    const parsed: unknown = parseJson(text);
    if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) problem = parsed as Partial<Problem>;
  } catch {
    problem = undefined;
  }
  if (!problem || typeof problem.code !== 'string') {
    return new OrgdataError({
      code: response.status >= 500 ? 'internal_error' : 'unexpected_response',
      message: `${what} answered ${response.status} without a problem document${requestId ? ` (request ${requestId})` : ''}`,
      status: response.status,
      requestId,
      retryAfter,
    });
  }
  // A code this client does not know yet (from a newer server) is kept as sent.
  const code = problem.code as OrgdataErrorCode;
  const id = problem.request_id ?? requestId;
  return new OrgdataError({
    code,
    message: `${what} answered ${response.status} ${problem.code}: ${problem.detail ?? problem.title ?? ''}${id ? ` (request ${id})` : ''}`,
    status: typeof problem.status === 'number' ? problem.status : response.status,
    title: problem.title,
    detail: problem.detail,
    requestId: id,
    type: problem.type,
    errors: problem.errors,
    quota: problem.quota,
    existingId: problem.existing_id,
    missingIds: problem.missing_ids,
    index: problem.index,
    retryAfter,
  });
}
