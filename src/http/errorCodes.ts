/** Every error code the API sends: the one list behind problem `type` links and /docs/api/errors. */
export const ERROR_CODES = {
  invalid_request: {
    status: 400,
    summary:
      'The request is malformed: a field is missing, of the wrong type, too long, or not allowed; an unknown query parameter; a body that is not JSON. The `errors` array names each field.',
  },
  invalid_cursor: {
    status: 400,
    summary:
      'The cursor was changed, comes from another endpoint or organisation, or was issued for other filters. Pass `next_cursor` back exactly as received, with the same filters.',
  },
  invalid_idempotency_key: {
    status: 400,
    summary: 'The Idempotency-Key header is empty, longer than 255 characters, or contains non-printable characters.',
  },
  size_mismatch: { status: 400, summary: 'The uploaded body is not the size that was reserved.' },
  unauthorized: {
    status: 401,
    summary:
      'The API key is missing, malformed, unknown, revoked or expired, or was sent in the URL. Send it as `Authorization: Bearer od_live_…`. A key that appeared in a URL should be revoked.',
  },
  forbidden: { status: 403, summary: 'The key is valid but lacks the scope this operation needs; the detail names it.' },
  invalid_signature: { status: 403, summary: 'The upload or download link was altered or is not for this file.' },
  not_found: { status: 404, summary: 'No such route, or no record with that id in your organisation.' },
  method_not_allowed: { status: 405, summary: 'The path exists but not with this method; the `Allow` header lists the methods it takes.' },
  request_timeout: {
    status: 408,
    summary:
      'The request did not arrive in time: its headers within `HEADERS_TIMEOUT_SECONDS`, all of it within `REQUEST_TIMEOUT_SECONDS`, or its body stopped arriving for `BODY_IDLE_TIMEOUT_SECONDS` (a slow body that keeps arriving is fine); the connection is closed. Send it again.',
  },
  idempotency_conflict: {
    status: 409,
    summary: 'A request with the same Idempotency-Key is still being processed. Retry after it completes.',
  },
  contact_exists: {
    status: 409,
    summary: 'Another contact in the organisation has this email (compared case-insensitively); `existing_id` names it.',
  },
  external_id_exists: {
    status: 409,
    summary: 'Another contact in the organisation has this `external_id` (compared exactly); `existing_id` names it.',
  },
  label_exists: {
    status: 409,
    summary: 'Another label in the organisation has this name (compared case-insensitively); `existing_id` names it.',
  },
  member_exists: { status: 409, summary: 'The user is already a member of the organisation.' },
  already_uploaded: { status: 409, summary: 'The file has already been uploaded; an upload link works once.' },
  file_not_ready: { status: 409, summary: 'The file has not been uploaded yet, so it cannot be downloaded.' },
  contact_erased: {
    status: 410,
    summary:
      'The stored answer to this request (sent again with its Idempotency-Key) named a contact that the operator has since erased (it returned the contact, or a batch item or a 409 `contact_exists` naming it); the answer is gone and the request is not run again, whatever body comes with the key.',
  },
  upload_url_expired: { status: 410, summary: 'The upload link has expired. Reserve the upload again with a new Idempotency-Key.' },
  download_url_expired: {
    status: 410,
    summary: 'The download link has expired. Ask for a new one with GET /files/{id}/download.',
  },
  payload_too_large: {
    status: 413,
    summary: 'The body is larger than the server accepts (`MAX_JSON_BYTES` for JSON, `MAX_FILE_BYTES` for files).',
  },
  uri_too_long: { status: 414, summary: 'The URL is longer than 8 KiB. Filters and ids are short; check how the URL is built.' },
  unsupported_media_type: { status: 415, summary: 'Requests with a body must send `Content-Type: application/json`.' },
  duplicate_in_batch: {
    status: 422,
    summary:
      'An earlier item of the same POST /contacts/batch is about the same contact (same email or external_id); `duplicate_of` names it. Send one item per contact.',
  },
  idempotency_key_reused: {
    status: 422,
    summary: 'The Idempotency-Key was already used with a different method, path or body in the last 24 hours.',
  },
  rate_limited: {
    status: 429,
    summary: "The key's token bucket is empty (burst 60, refilled at 5 per second by default). Wait `Retry-After` seconds.",
  },
  quota_exceeded: {
    status: 429,
    summary: 'The organisation has used its daily request quota; the `quota` block says when it resets (midnight UTC).',
  },
  headers_too_large: {
    status: 431,
    summary: 'The request headers together are larger than the server accepts (16 KiB).',
  },
  internal_error: {
    status: 500,
    summary: 'Something failed on our side. Nothing about it is disclosed; quote the request_id to the operator.',
  },
  service_unavailable: {
    status: 503,
    summary:
      'The database did not answer in time or kept giving a write up for concurrent ones (a deadlock retried a few times; nothing was changed), or cannot be reached, Redis is unreachable while signing in to the dashboard, or the server is shutting down. Retry after `Retry-After` seconds; a POST retried with the same Idempotency-Key is applied at most once.',
  },
  storage_unavailable: {
    status: 503,
    summary:
      'File storage cannot be reached right now; nothing was changed (an upload leaves the file `pending`). Retry the same request shortly.',
  },
} as const satisfies Record<string, { status: number; summary: string }>;

export type ErrorCode = keyof typeof ERROR_CODES;
