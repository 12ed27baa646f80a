import { OrgdataError } from './errors.js';

export interface RetrySettings {
  maxRetries: number;
  maxRetryDelayMs: number;
}

const INITIAL_DELAY_MS = 500;
const MAX_BACKOFF_MS = 8_000;

/** Exponential back-off with jitter: about 0.5 s, 1 s, 2 s, … up to 8 s, each 0–25 % shorter. */
export function backoffMs(retry: number, settings: RetrySettings, random = Math.random): number {
  const base = Math.min(INITIAL_DELAY_MS * 2 ** retry, MAX_BACKOFF_MS);
  return Math.min(base * (1 - 0.25 * random()), settings.maxRetryDelayMs);
}

/** A `Retry-After` wait, with a little jitter on top so that a burst of clients does not come back at one instant. */
function retryAfterMs(seconds: number, settings: RetrySettings, random: () => number): number {
  return Math.min(seconds * 1000 + 250 * random(), settings.maxRetryDelayMs);
}

/**
 * How long to wait before retrying after `error` (the `retry`-th retry, from 0), or null when it
 * must be thrown now: other 4xx, the last attempt, or a daily quota that resets too far away.
 */
export function retryDelay(
  error: OrgdataError,
  retry: number,
  settings: RetrySettings,
  now = Date.now(),
  random = Math.random,
): number | null {
  if (retry >= settings.maxRetries) return null;
  if (error.code === 'connection_error' || error.code === 'timeout') return backoffMs(retry, settings, random);
  const status = error.status;
  if (status === undefined) return null;
  if (error.code === 'quota_exceeded') {
    const resetsAt = error.quota ? Date.parse(error.quota.resets_at) : NaN;
    const waitMs = Number.isNaN(resetsAt) ? (error.retryAfter ?? Infinity) * 1000 : resetsAt - now;
    // Sleeping until midnight is not a retry: say so at once.
    return waitMs > settings.maxRetryDelayMs ? null : Math.max(0, waitMs);
  }
  if (status === 429 || status >= 500) {
    return error.retryAfter !== undefined ? retryAfterMs(error.retryAfter, settings, random) : backoffMs(retry, settings, random);
  }
  if (status === 409 && error.code === 'idempotency_conflict') return backoffMs(retry, settings, random);
  return null;
}

/** Resolves after `ms`, or rejects with the caller's abort. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortedError(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortedError(signal!));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export function abortedError(signal: AbortSignal): OrgdataError {
  return new OrgdataError({ code: 'aborted', message: 'The request was aborted by its signal.', cause: signal.reason });
}
