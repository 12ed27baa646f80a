import { S3Client } from '@aws-sdk/client-s3';
import type { S3Settings } from '../../config.js';

/*
 * Deadlines of every call to the bucket, so that a store that stalls (accepts connections, never
 * answers) fails a request with 503 within about 20 s instead of holding it (and whatever it
 * holds) for minutes: the SDK's defaults (no deadline, three attempts) took a stalled DELETE 190 s.
 */
/** A bucket that does not accept a connection within this is down (rather than slow). */
const CONNECT_TIMEOUT_MS = 3_000;
/** A connection with no traffic for this long is given up (an upload's part stalled, say). */
const IDLE_TIMEOUT_MS = 10_000;
/**
 * A download's body waits on its reader too (a slow client): its connection is given up only
 * after this long without traffic. The answer's headers are bounded by DEADLINE_MS all the same.
 */
export const DOWNLOAD_IDLE_TIMEOUT_MS = 60_000;
/** Two attempts at most: one retry of a failed or stalled request, inside the deadline. */
const MAX_ATTEMPTS = 2;
/** A call's answer (its headers; a download's body streams on after) must come within this. */
export const DEADLINE_MS = 20_000;

export function openS3Client(settings: S3Settings, idleTimeoutMs = IDLE_TIMEOUT_MS): S3Client {
  return new S3Client({
    region: settings.region,
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    forcePathStyle: settings.forcePathStyle,
    ...(settings.credentials ? { credentials: settings.credentials } : {}),
    maxAttempts: MAX_ATTEMPTS,
    requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, socketTimeout: idleTimeoutMs },
  });
}

/** Network failures that say nothing about the request, only that the store cannot be reached. */
const NETWORK_ERRORS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/**
 * Whether an SDK error means the store is unavailable (worth a retry later) rather than that the
 * request or the configuration is wrong: the SDK has already retried these a few times.
 */
export function isUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { $metadata, code } = error as Error & { $metadata?: { httpStatusCode?: number }; code?: string };
  const status = $metadata?.httpStatusCode;
  if (status !== undefined && (status >= 500 || status === 429)) return true;
  return error.name === 'TimeoutError' || error.name === 'AbortError' || (code !== undefined && NETWORK_ERRORS.has(code));
}
