import { STATUS_CODES } from 'node:http';
import { ERROR_CODES, type ErrorCode } from '../errorCodes.js';
import { EXAMPLE_IDS } from './examples.js';
import { API_PREFIX, type Documented } from './routes.js';

/** The error side of each operation: the codes it can answer with, and an example of each. */

type Json = Record<string, unknown>;

/**
 * Where an error code can come from, for the codes that only some operations send. Codes not
 * listed can come from any operation that documents their status.
 */
const CODE_SOURCES: Partial<Record<ErrorCode, (route: Documented) => boolean>> = {
  invalid_cursor: (route) => Object.hasOwn(((route.schema.querystring as Json | undefined)?.properties ?? {}) as Json, 'cursor'),
  invalid_idempotency_key: (route) => route.idempotent,
  idempotency_conflict: (route) => route.idempotent,
  idempotency_key_reused: (route) => route.idempotent,
  // A replayed answer that named a contact erased since: only idempotent POSTs store answers.
  contact_erased: (route) => route.idempotent,
  contact_exists: (route) => /^\/api\/v1\/contacts(\/:id|\/batch)?$/.test(route.url),
  external_id_exists: (route) => /^\/api\/v1\/contacts(\/:id|\/batch)?$/.test(route.url),
  duplicate_in_batch: (route) => route.url === '/api/v1/contacts/batch',
  label_exists: (route) => route.url.startsWith('/api/v1/contacts/labels'),
  file_not_ready: (route) => route.url === '/api/v1/files/:id/download' || route.url === '/downloads/:token',
  // A key's scope: only operations that take a key.
  forbidden: (route) => route.authenticated,
  // The file store, where an operation waits on it (a delete does not: housekeeping purges later).
  storage_unavailable: (route) => STORAGE_ROUTES.has(route.url),
  // The upload and download links (outside /api/v1).
  size_mismatch: (route) => route.url === '/uploads/:token',
  invalid_signature: (route) => !route.url.startsWith(API_PREFIX),
  already_uploaded: (route) => route.url === '/uploads/:token',
  upload_url_expired: (route) => route.url === '/uploads/:token',
  download_url_expired: (route) => route.url === '/downloads/:token',
  // Sent by the operator CLI and the dashboard, never by an API operation.
  member_exists: () => false,
  // Any operation can send these: described once, in the document's description (EDGE_STATUSES).
  request_timeout: () => false,
  uri_too_long: () => false,
  headers_too_large: () => false,
  internal_error: () => false,
  service_unavailable: () => false,
};

const STORAGE_ROUTES = new Set(['/api/v1/files/:id/download', '/uploads/:token', '/downloads/:token']);

/** The codes an operation can answer with this status: none means the operation does not document the status. */
export function codesFor(route: Documented, status: number): ErrorCode[] {
  return (Object.keys(ERROR_CODES) as ErrorCode[]).filter(
    (code) => ERROR_CODES[code].status === status && (CODE_SOURCES[code]?.(route) ?? true),
  );
}

/**
 * Statuses any operation can answer whatever its own logic, described once (EDGE_ERRORS) rather
 * than on every operation: one that stalls (408), an over-long URL (414) or headers (431), a
 * failure of ours (500), and a database that did not answer within its statement timeout, kept
 * rolling a write back for concurrent ones' sake, or cannot be reached (503, with Retry-After).
 * An operation still lists a 503 whose code is its own (`storage_unavailable`).
 */
export const EDGE_STATUSES = [408, 414, 431, 500, 503];

/** The info description's section on the edge errors: each code links to the error reference. */
export function edgeErrorsSection(publicUrl: string): string {
  const line = (code: ErrorCode, extra = '') =>
    `- **${ERROR_CODES[code].status}** [\`${code}\`](${publicUrl}/docs/api/errors#${code}): ${ERROR_CODES[code].summary}${extra}`;
  return [
    '## Errors every operation can answer',
    '',
    'These are not repeated on each operation. Each is an RFC 9457 problem document (`application/problem+json`) like any other error.',
    '',
    `- **400** [\`invalid_request\`](${publicUrl}/docs/api/errors#invalid_request): a request the HTTP parser cannot read, refused before any operation sees it (an operation lists the 400s of its own).`,
    line('request_timeout'),
    line('uri_too_long'),
    line('headers_too_large'),
    line('internal_error'),
    line('service_unavailable', ' The answer carries `Retry-After` (seconds).'),
  ].join('\n');
}

/** One example problem document per error code the document mentions. */
export function problemExamples(publicUrl: string, usedCodes: Set<ErrorCode>): Json {
  const examples: Json = {};
  for (const code of Object.keys(ERROR_CODES) as ErrorCode[]) {
    if (!usedCodes.has(code)) continue;
    const { status, summary } = ERROR_CODES[code];
    const value: Json = {
      type: `${publicUrl}/docs/api/errors#${code}`,
      title: STATUS_CODES[status] ?? 'Error',
      status,
      code,
      detail: summary.replace(/`/g, ''),
      request_id: 'req_8fK2mQ9xLp3vT7wZ1aB4',
    };
    if (code === 'invalid_request') value.errors = [{ field: 'email', message: 'must match format "idn-email"' }];
    if (code === 'contact_exists' || code === 'external_id_exists') value.existing_id = EXAMPLE_IDS.contact;
    if (code === 'label_exists') value.existing_id = EXAMPLE_IDS.label;
    if (code === 'quota_exceeded') value.quota = { policy: 'daily', limit: 10000, used: 10000, resets_at: '2026-11-21T00:00:00.000Z' };
    examples[code] = { summary: `${status} ${code}`, value };
  }
  return examples;
}
