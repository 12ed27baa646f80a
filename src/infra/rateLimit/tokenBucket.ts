import type { RateLimitDecision, RateLimitSettings } from '../../http/rateLimiter.js';
import { isSandboxOrgId } from '../../domain/orgs/sandbox.js';
import { isoAt } from '../../domain/ids.js';

/** The daily quota of an organisation: a sandbox (`sbx_…`, test mode) has its own (default 1,000). */
export function dailyQuotaOf(settings: RateLimitSettings, orgId: string): number {
  return isSandboxOrgId(orgId) ? (settings.sandboxDailyQuota ?? 1_000) : settings.dailyQuota;
}

/** The token bucket's and the daily quota's arithmetic, shared by the memory and Redis rate limiters. */
export function nextMidnightUtc(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

export function utcDay(now: Date): string {
  return isoAt(now.getTime()).slice(0, 10);
}

/** The shared arithmetic of both implementations, from the state they read and wrote. */
export function decide(
  settings: RateLimitSettings,
  now: Date,
  bucket: { tokens: number; allowed: boolean },
  used: number,
  /** The organisation's daily quota (dailyQuotaOf). */
  dailyQuota: number = settings.dailyQuota,
): RateLimitDecision {
  const resetsAt = nextMidnightUtc(now);
  const secondsToMidnight = Math.max(1, Math.ceil((resetsAt.getTime() - now.getTime()) / 1000));
  const quota = {
    limit: dailyQuota,
    used: Math.min(used, dailyQuota),
    remaining: Math.max(0, dailyQuota - used),
    resetsAt: Math.floor(resetsAt.getTime() / 1000),
  };
  const secondsToFull = Math.ceil((settings.burst - bucket.tokens) / settings.perSecond);
  const tokens = Math.floor(bucket.tokens);
  // With the day's quota used up, the wait is until midnight whatever the bucket holds: saying
  // "retry in 1 s" would only earn the client a quota_exceeded a second later.
  const quotaUsedUp = bucket.allowed ? used > dailyQuota : used >= dailyQuota;
  if (quotaUsedUp) {
    return { refusal: 'quota_exceeded', tokens, secondsToFull, retryAfterSeconds: secondsToMidnight, quota };
  }
  if (!bucket.allowed) {
    const retryAfterSeconds = Math.max(1, Math.ceil((1 - bucket.tokens) / settings.perSecond));
    return { refusal: 'rate_limited', tokens, secondsToFull, retryAfterSeconds, quota };
  }
  return { refusal: null, tokens, secondsToFull, retryAfterSeconds: 0, quota };
}
