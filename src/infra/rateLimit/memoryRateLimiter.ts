import { decide, utcDay, type RateLimitDecision, type RateLimiter, type RateLimitSettings } from './rateLimiter.js';

/** For a single process (the embedded default). State lives in memory and resets on restart. */
export class MemoryRateLimiter implements RateLimiter {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private readonly quotas = new Map<string, number>();
  private day = '';

  constructor(private readonly settings: RateLimitSettings) {}

  take(keyId: string, orgId: string, now: Date): Promise<RateLimitDecision> {
    const { burst, perSecond } = this.settings;
    const at = now.getTime();
    const previous = this.buckets.get(keyId);
    let tokens = previous ? Math.min(burst, previous.tokens + (Math.max(0, at - previous.at) / 1000) * perSecond) : burst;
    const allowed = tokens >= 1;
    if (allowed) tokens -= 1;
    this.buckets.set(keyId, { tokens, at });

    const day = utcDay(now);
    if (day !== this.day) {
      // A new UTC day: every organisation's count starts again, and idle full buckets are forgotten.
      this.quotas.clear();
      this.day = day;
      for (const [id, bucket] of this.buckets) if (bucket.tokens >= burst - 1 && id !== keyId) this.buckets.delete(id);
    }
    let used = this.quotas.get(orgId) ?? 0;
    if (allowed) this.quotas.set(orgId, ++used);
    return Promise.resolve(decide(this.settings, now, { tokens, allowed }, used));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}
