/** The request log and its daily counts: API requests made with keys (see schema.ts for the conventions). */

/** One API request made with a key (migration 017): never a body, never the key. */
export interface RequestLogTable {
  request_id: string;
  org_id: string;
  key_id: string;
  at: string;
  method: string;
  /** The route's template (`/api/v1/contacts/:id`), not the path. */
  route: string;
  status: number;
  /** The problem's `code` when the answer was one. */
  error_code: string | null;
  duration_ms: number;
  /** Approximate: the client's network (/24, /48) and User-Agent product. */
  origin: string;
}

/** Requests of one key on one day (UTC) with one class of status: 2xx, 3xx, 4xx, 429, 5xx. */
export interface RequestUsageTable {
  org_id: string;
  key_id: string;
  day: string;
  class: string;
  count: number;
}
