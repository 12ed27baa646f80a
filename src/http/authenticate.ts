import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { authenticateKey, describeOrigin, keyUseDue, recordKeyUse } from '../domain/apiKeys/apiKeys.js';
import { ForbiddenError, RateLimitedError, UnauthorizedError } from '../domain/errors.js';
import { DEFAULT_SANDBOX_DAILY_QUOTA, type RateLimiter, type RateLimitSettings } from './rateLimiter.js';
import type { VerifiedKeyCache } from '../domain/apiKeys/keyCache.js';
import { policyHeader, setRateLimitHeaders } from './rateLimitHeaders.js';
import { routeOf } from './routeOf.js';

export interface AuthDeps {
  db: Kysely<Database>;
  secret: string;
  rateLimiter: RateLimiter;
  limits: RateLimitSettings;
  keyCache?: VerifiedKeyCache;
}

const BEARER = /^Bearer +(\S+) *$/i;

/**
 * The edge of every /api/v1 route: key → limits → scope, in that order, so that every
 * authenticated response (errors and 429s included) carries the rate-limit headers, and a request
 * refused for its scope still counts as a request.
 */
export function authenticate(deps: AuthDeps) {
  const policy = policyHeader(deps.limits);
  // A sandbox's daily quota is its own (SANDBOX_DAILY_QUOTA); the burst and rate are the same.
  const testPolicy = policyHeader(deps.limits, deps.limits.sandboxDailyQuota ?? DEFAULT_SANDBOX_DAILY_QUOTA);
  return async function onRequest(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const header = request.headers.authorization;
    if (header === undefined || header === '') {
      throw new UnauthorizedError(
        'Send your API key in the Authorization header: "Authorization: Bearer od_live_…" (or od_test_… in test mode).',
      );
    }
    const match = BEARER.exec(header);
    if (!match?.[1]) throw new UnauthorizedError('The Authorization header must be "Bearer" followed by your API key.');
    const now = new Date();
    const key = await authenticateKey(deps.db, deps.secret, match[1], now, deps.keyCache);
    // Verified: a request refused by the limits below is still this key's (the request log shows it).
    request.apiKey = key;

    const decision = await deps.rateLimiter.take(key.id, key.orgId, now);
    setRateLimitHeaders(reply, key.livemode ? policy : testPolicy, decision);
    if (decision.refusal === 'rate_limited') {
      throw new RateLimitedError(
        'rate_limited',
        `Too many requests for this key. Retry in ${decision.retryAfterSeconds} s.`,
        decision.retryAfterSeconds,
      );
    }
    if (decision.refusal === 'quota_exceeded') {
      const resetsAt = new Date(decision.quota.resetsAt * 1000).toISOString();
      throw new RateLimitedError(
        'quota_exceeded',
        `The organisation has used its daily quota of ${decision.quota.limit} requests; it resets at ${resetsAt}.`,
        decision.retryAfterSeconds,
        {
          quota: { policy: 'daily', limit: decision.quota.limit, used: decision.quota.used, resets_at: resetsAt },
        },
      );
    }
    // At most one write a minute per key, off the request's path (most requests stop at the check).
    if (keyUseDue(key, now)) {
      recordKeyUse(deps.db, key, () => describeOrigin(request.ip, request.headers['user-agent']), now).catch((error: unknown) =>
        request.log.warn({ err: error }, 'could not record key use'),
      );
    }

    const { config } = routeOf(request);
    const scope = config.scope;
    if (scope && !key.scopes.has(scope)) {
      throw new ForbiddenError(`This API key lacks the ${scope} scope required for this operation.`);
    }
    const anyOf = config.anyOfScopes;
    if (anyOf && !anyOf.some((s) => key.scopes.has(s))) {
      throw new ForbiddenError(`This API key needs one of the scopes ${anyOf.join(', ')} for this operation.`);
    }
  };
}
