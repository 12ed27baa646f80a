import { createClient, type RedisClientType } from '@redis/client';
import { decide, utcDay, type RateLimitDecision, type RateLimiter, type RateLimitSettings } from './rateLimiter.js';

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

export class RedisRateLimiter implements RateLimiter {
  private sha: string | null = null;

  private constructor(
    private readonly client: RedisClientType,
    private readonly settings: RateLimitSettings,
    private readonly prefix: string,
  ) {}

  static async connect(url: string, settings: RateLimitSettings, prefix = 'orgdata:'): Promise<RedisRateLimiter> {
    const client: RedisClientType = createClient({ url });
    client.on('error', () => {
      // Reconnection is automatic; a request made while Redis is away fails and is answered 500.
    });
    await client.connect();
    return new RedisRateLimiter(client, settings, prefix);
  }

  async take(keyId: string, orgId: string, now: Date): Promise<RateLimitDecision> {
    const day = utcDay(now);
    const options = {
      keys: [`${this.prefix}bucket:${keyId}`, `${this.prefix}quota:${orgId}:${day}`],
      arguments: [String(this.settings.burst), String(this.settings.perSecond), String(2 * 86_400)],
    };
    let reply: unknown;
    try {
      this.sha ??= await this.client.scriptLoad(SCRIPT);
      reply = await this.client.evalSha(this.sha, options);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      reply = await this.client.eval(SCRIPT, options);
    }
    const [allowed, tokens, used] = reply as [number, string, number];
    return decide(this.settings, now, { tokens: Number(tokens), allowed: allowed === 1 }, Number(used));
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}
