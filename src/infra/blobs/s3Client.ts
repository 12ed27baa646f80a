import { S3Client } from '@aws-sdk/client-s3';
import type { S3Settings } from '../../config.js';

/** A bucket that does not answer a connection within this is down (rather than slow). */
const CONNECT_TIMEOUT_MS = 5_000;
/**
 * A connection with no traffic for this long is given up: a stalled store fails the request
 * instead of holding it. (A download whose reader stops reading for as long is cut too.)
 */
const IDLE_TIMEOUT_MS = 60_000;

export function openS3Client(settings: S3Settings): S3Client {
  return new S3Client({
    region: settings.region,
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    forcePathStyle: settings.forcePathStyle,
    ...(settings.credentials ? { credentials: settings.credentials } : {}),
    requestHandler: { connectionTimeout: CONNECT_TIMEOUT_MS, socketTimeout: IDLE_TIMEOUT_MS },
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
  return error.name === 'TimeoutError' || (code !== undefined && NETWORK_ERRORS.has(code));
}
