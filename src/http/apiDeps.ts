import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { VerifiedKeyCache } from '../domain/apiKeys/keyCache.js';
import type { FileDeps } from '../domain/files/files.js';
import type { RateLimiter, RateLimitSettings } from './rateLimiter.js';
import type { RequestLogWriter } from './requestLog.js';

/** What the authenticated API and each of its route files are given (api.ts registers them with it). */
export interface ApiDeps {
  db: Kysely<Database>;
  files: FileDeps;
  secret: string;
  rateLimiter: RateLimiter;
  limits: RateLimitSettings;
  /** How long an Idempotency-Key claim protects an in-flight request before a retry may take it over. */
  idempotencyLockMs: number;
  keyCache?: VerifiedKeyCache;
  /** Where problem `type` links point (config.docsUrl). */
  docsUrl: string;
  /** Where each request's row goes (REQUEST_LOG_DAYS > 0). */
  requestLog?: RequestLogWriter | null;
}
