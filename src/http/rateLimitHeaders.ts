import type { FastifyReply } from 'fastify';
import type { RateLimitDecision, RateLimitSettings } from './rateLimiter.js';

/**
 * The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers) for the key's bucket, and the
 * X-RateLimit-* trio for the organisation's daily quota, set on every authenticated response.
 */
export function policyHeader(settings: RateLimitSettings, dailyQuota = settings.dailyQuota): string {
  const window = Math.ceil(settings.burst / settings.perSecond);
  return `"default";q=${settings.burst};w=${window}, "daily";q=${dailyQuota};w=86400`;
}

export function setRateLimitHeaders(reply: FastifyReply, policy: string, decision: RateLimitDecision): void {
  reply.header('ratelimit-policy', policy);
  reply.header('ratelimit', `"default";r=${decision.tokens};t=${decision.secondsToFull}`);
  reply.header('x-ratelimit-limit', String(decision.quota.limit));
  reply.header('x-ratelimit-remaining', String(decision.quota.remaining));
  reply.header('x-ratelimit-reset', String(decision.quota.resetsAt));
  if (decision.refusal) reply.header('retry-after', String(decision.retryAfterSeconds));
}
