import { createHash, randomUUID } from 'node:crypto';
import { createClient, type RedisClientType } from '@redis/client';
import { countersOf, waitSeconds, WINDOW_MS, type SignInAttempt, type SignInThrottle } from './signInThrottle.js';

// One atomic step over the three counters (sorted sets of attempt ids scored by time), so two
// instances can never both let through the last attempt a limit allows. Time comes from Redis
// itself, so instances' clocks may disagree. Returns 0 when the attempt was counted, else the
// milliseconds until the fullest counter drops below its limit.
const SCRIPT = `
local window = tonumber(ARGV[1])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = 0
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local limit = tonumber(ARGV[i + 2])
  local count = redis.call('ZCARD', key)
  if count >= limit then
    local oldest = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + window - now)
  end
end
if wait > 0 then return wait end
for _, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[2])
  redis.call('PEXPIRE', key, window)
end
return 0
`;

/** Shared by every instance through Redis (REDIS_URL): keys `{prefix}signin:{kind}:{sha256}`. */
export class RedisSignInThrottle implements SignInThrottle {
  private sha: string | null = null;

  private constructor(
    private readonly client: RedisClientType,
    private readonly prefix: string,
  ) {}

  static async connect(url: string, prefix = 'orgdata:'): Promise<RedisSignInThrottle> {
    const client: RedisClientType = createClient({ url });
    client.on('error', () => {
      // Reconnection is automatic; a sign-in tried while Redis is away fails (500) rather than
      // going unthrottled.
    });
    await client.connect();
    return new RedisSignInThrottle(client, prefix);
  }

  async begin(email: string, ip: string): Promise<SignInAttempt> {
    const counters = countersOf(email, ip);
    // Addresses are hashed: the keys carry no e-mail address in clear.
    const keys = counters.map((c) => `${this.prefix}signin:${c.kind}:${createHash('sha256').update(c.subject).digest('base64url')}`);
    const id = randomUUID();
    const options = { keys, arguments: [String(WINDOW_MS), id, ...counters.map((c) => String(c.limit))] };
    let reply: unknown;
    try {
      this.sha ??= await this.client.scriptLoad(SCRIPT);
      reply = await this.client.evalSha(this.sha, options);
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
      reply = await this.client.eval(SCRIPT, options);
    }
    const wait = waitSeconds(Number(reply));
    const succeeded = async () => {
      if (wait > 0) return;
      const forgive = this.client.multi();
      for (const key of keys) forgive.zRem(key, id);
      await forgive.exec();
    };
    return { waitSeconds: wait, succeeded };
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}
