import type { RateLimitDecision, RateLimiter, RateLimitSettings } from '../../http/rateLimiter.js';
import { dailyQuotaOf, decide, utcDay } from './tokenBucket.js';

/** For a single process (the embedded default). State lives in memory and resets on restart. */
export class MemoryRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  /** Requests counted per organisation and UTC day, keyed `day|orgId`, like the Redis keys. */
  private readonly quotas = new Map<string, number>();
  private day = '';

  constructor(private readonly settings: RateLimitSettings) {}

  private refilled(bucket: { tokens: number; at: number }, at: number): number {
    const { burst, perSecond } = this.settings;
    return Math.min(burst, bucket.tokens + (Math.max(0, at - bucket.at) / 1000) * perSecond);
  }

  take(keyId: string, orgId: string, now: Date): Promise<RateLimitDecision> {
    const { burst } = this.settings;
    const at = now.getTime();
    const previous = this.buckets.get(keyId);
    let tokens = previous ? this.refilled(previous, at) : burst;
    const allowed = tokens >= 1;
    if (allowed) tokens -= 1;
    // Concurrent requests may arrive with slightly out-of-order times: never move the bucket's
    // clock backwards, or the same interval would be refilled twice.
    this.buckets.set(keyId, { tokens, at: previous ? Math.max(previous.at, at) : at });

    const day = utcDay(now);
    if (day > this.day) {
      // A new UTC day: drop the counts of the days before yesterday (a request stamped just before
      // midnight but arriving late still counts into yesterday, as with Redis) and forget idle
      // buckets that have refilled completely.
      this.day = day;
      const yesterday = utcDay(new Date(at - 86_400_000));
      for (const quotaKey of this.quotas.keys()) if (quotaKey.slice(0, day.length) < yesterday) this.quotas.delete(quotaKey);
      for (const [id, bucket] of this.buckets) if (id !== keyId && this.refilled(bucket, at) >= burst) this.buckets.delete(id);
    }
    const quotaKey = `${day}|${orgId}`;
    let used = this.quotas.get(quotaKey) ?? 0;
    if (allowed) this.quotas.set(quotaKey, ++used);
    return Promise.resolve(decide(this.settings, now, { tokens, allowed }, used, dailyQuotaOf(this.settings, orgId)));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
