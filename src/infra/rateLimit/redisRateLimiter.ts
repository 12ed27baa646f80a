import { DependencyHealth } from '../health.js';
import { closeRedisClient, openRedisClient, runScript, startupCheck, type RedisClient } from '../redis/connection.js';
import { MemoryRateLimiter } from './memoryRateLimiter.js';
import type { RateLimitDecision, RateLimiter, RateLimitSettings } from '../../http/rateLimiter.js';
import { dailyQuotaOf, decide, utcDay } from './tokenBucket.js';

// One atomic step for both limits, so two server instances can never both take the last token or
// the last request of the day. Time comes from Redis itself, so instances' clocks may disagree.
const SCRIPT = `
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local quotaTtl = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
tokens = math.min(burst, tokens + math.max(0, now - at) / 1000 * rate)
local allowed = 0
local used
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
  used = redis.call('INCR', KEYS[2])
  if used == 1 then redis.call('EXPIRE', KEYS[2], quotaTtl) end
else
  used = tonumber(redis.call('GET', KEYS[2]) or '0')
end
-- Never move the bucket's clock backwards (Redis time may step back): that would refill twice.
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(math.max(at, now)))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return {allowed, tostring(tokens), used}
`;

const LOCAL_COUNTING = 'rate limits and quotas are counted by each instance alone';

/**
 * Shared by every instance through Redis. While Redis cannot be reached (down, stalled, or not yet
 * connected at start) each request is counted by this instance alone (a MemoryRateLimiter), so
 * the API keeps answering with limits that hold per instance; the outage is logged once and shown
 * by /readyz as `degraded`. Counting goes back to Redis as soon as it answers again, without a
 * restart (what was counted locally meanwhile is not carried over).
 */
export class RedisRateLimiter implements RateLimiter {
  private readonly script: { text: string; sha?: string } = { text: SCRIPT };
  private readonly local: MemoryRateLimiter;

  private constructor(
    private readonly client: RedisClient,
    private readonly settings: RateLimitSettings,
    private readonly health: DependencyHealth,
    private readonly prefix: string,
  ) {
    this.local = new MemoryRateLimiter(settings);
  }

  /** Waits for the connection a moment, not more: without Redis it starts counting locally. */
  static async connect(
    url: string,
    settings: RateLimitSettings,
    options: { prefix?: string; health?: DependencyHealth } = {},
  ): Promise<RedisRateLimiter> {
    const health = options.health ?? new DependencyHealth();
    const client = openRedisClient(url, 'orgdata-rate-limits', { health, use: LOCAL_COUNTING });
    await startupCheck(client);
    return new RedisRateLimiter(client, settings, health, options.prefix ?? 'orgdata:');
  }

  async take(keyId: string, orgId: string, now: Date): Promise<RateLimitDecision> {
    if (!this.client.isReady) {
      this.health.failed('redis', LOCAL_COUNTING, new Error('not connected'));
      return this.local.take(keyId, orgId, now);
    }
    const day = utcDay(now);
    let reply: unknown;
    try {
      reply = await runScript(this.client, this.script, {
        keys: [`${this.prefix}bucket:${keyId}`, `${this.prefix}quota:${orgId}:${day}`],
        arguments: [String(this.settings.burst), String(this.settings.perSecond), String(2 * 86_400)],
      });
    } catch (error) {
      this.health.failed('redis', LOCAL_COUNTING, error);
      return this.local.take(keyId, orgId, now);
    }
    this.health.recovered('redis', LOCAL_COUNTING);
    const [allowed, tokens, used] = reply as [number, string, number];
    return decide(this.settings, now, { tokens: Number(tokens), allowed: allowed === 1 }, Number(used), dailyQuotaOf(this.settings, orgId));
  }

  async close(): Promise<void> {
    await closeRedisClient(this.client);
  }
}
