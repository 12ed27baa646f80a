/**
 * The per-key token bucket and the per-organisation daily quota, behind one interface with a
 * local (one process) and a shared (Redis) implementation, chosen from configuration in one place
 * (infra/choose.ts). The interface belongs to the API edge, its only user (authenticate.ts);
 * infra/rateLimit holds the implementations (memory, Redis) and their shared arithmetic (tokenBucket.ts).
 *
 * Written here rather than taken from @fastify/rate-limit: that plugin counts fixed windows per
 * route, while the contract needs a refilling token bucket per API key, a second counter per
 * organisation that refused requests do not touch, and the IETF RateLimit/RateLimit-Policy fields.
 */
export interface RateLimitSettings {
  burst: number;
  perSecond: number;
  dailyQuota: number;
  /** A sandbox's daily quota (test mode): default 1,000. The burst and rate are the same in both modes. */
  sandboxDailyQuota?: number;
}

export const DEFAULT_SANDBOX_DAILY_QUOTA = 1_000;

export interface RateLimitDecision {
  /** null when the request may go on. */
  refusal: 'rate_limited' | 'quota_exceeded' | null;
  /** Whole tokens left in the key's bucket after this request. */
  tokens: number;
  /** Seconds until the bucket is full again. */
  secondsToFull: number;
  /** Seconds until the next token (for `rate_limited`) or until midnight UTC (for the quota). */
  retryAfterSeconds: number;
  quota: { limit: number; used: number; remaining: number; resetsAt: number };
}

export interface RateLimiter {
  /** Takes one token for the key and, if one was there, counts one request for the organisation. */
  take(keyId: string, orgId: string, now: Date): Promise<RateLimitDecision>;
  close(): Promise<void>;
}
