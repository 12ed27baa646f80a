import { createHash, randomUUID } from 'node:crypto';
import { UnavailableError } from '../../domain/errors.js';
import { withDeadline } from '../deadline.js';
import { DependencyHealth } from '../health.js';
import { closeRedisClient, COMMAND_TIMEOUT_MS, openRedisClient, runScript, startupCheck, type RedisClient } from '../redis/connection.js';
import type { AttemptOptions, SignInAttempt, SignInThrottle, VisitLimits } from '../../dashboard/signInThrottle.js';
import { countersOf, DEFAULT_VISIT_LIMITS, visitCountersOf, waitSeconds, type Counter } from './counters.js';

// One atomic step over an attempt's counters (sorted sets of attempt ids scored by time), so two
// instances can never both let through the last attempt a limit allows. Time comes from Redis
// itself, so instances' clocks may disagree. ARGV: the attempt's id, then each key's limit and
// window (ms). Returns 0 when the attempt was counted, else the milliseconds until the fullest
// counter drops below its limit.
const SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = 0
for i, key in ipairs(KEYS) do
  local limit = tonumber(ARGV[2 * i])
  local window = tonumber(ARGV[2 * i + 1])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  local count = redis.call('ZCARD', key)
  if count >= limit then
    local oldest = redis.call('ZRANGE', key, count - limit, count - limit, 'WITHSCORES')
    wait = math.max(wait, tonumber(oldest[2]) + window - now)
  end
end
if wait > 0 then return wait end
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, now, ARGV[1])
  redis.call('PEXPIRE', key, tonumber(ARGV[2 * i + 1]))
end
return 0
`;

const SIGN_IN_REFUSED = 'dashboard sign-in is refused (503)';

/**
 * Shared by every instance through Redis (REDIS_URL): keys `{prefix}signin:{kind}:{sha256}`.
 * While Redis cannot be reached a sign-in is refused as unavailable (503, retry shortly) rather
 * than let through uncounted: counting locally would let an attacker spread guesses over the
 * instances during an outage they may have caused. Each call is bounded (see redis/connection.ts).
 */
export class RedisSignInThrottle implements SignInThrottle {
  private readonly script: { text: string; sha?: string } = { text: SCRIPT };

  private constructor(
    private readonly client: RedisClient,
    private readonly prefix: string,
    private readonly health: DependencyHealth,
    private readonly visits: VisitLimits,
  ) {}

  static async connect(
    url: string,
    options: { prefix?: string; health?: DependencyHealth; visits?: VisitLimits } = {},
  ): Promise<RedisSignInThrottle> {
    const health = options.health ?? new DependencyHealth();
    const client = openRedisClient(url, 'orgdata-sign-in', { health, use: SIGN_IN_REFUSED });
    await startupCheck(client);
    return new RedisSignInThrottle(client, options.prefix ?? 'orgdata:', health, options.visits ?? DEFAULT_VISIT_LIMITS);
  }

  /** Counts `id` in every counter, or in none when one is full: the milliseconds to wait then, else 0. */
  private async count(counters: Counter[], id: string): Promise<{ waitMs: number; keys: string[] }> {
    // Subjects are hashed: the keys carry no e-mail address in clear.
    const keys = counters.map((c) => `${this.prefix}signin:${c.kind}:${createHash('sha256').update(c.subject).digest('base64url')}`);
    let reply: unknown;
    try {
      if (!this.client.isReady) throw new Error('not connected');
      reply = await runScript(this.client, this.script, {
        keys,
        arguments: [id, ...counters.flatMap((c) => [String(c.limit), String(c.windowMs)])],
      });
    } catch (error) {
      this.health.failed('redis', SIGN_IN_REFUSED, error);
      throw new UnavailableError(
        'Sign-in is unavailable for a moment; nothing was changed. Try again shortly.',
        error,
        'service_unavailable',
      );
    }
    this.health.recovered('redis', SIGN_IN_REFUSED);
    return { waitMs: Number(reply), keys };
  }

  async begin(email: string, ip: string, options: AttemptOptions = {}): Promise<SignInAttempt> {
    const id = randomUUID();
    const { waitMs, keys } = await this.count(countersOf(email, ip, options), id);
    const wait = waitSeconds(waitMs);
    const succeeded = async () => {
      if (wait > 0) return;
      const forgive = this.client.multi();
      for (const key of keys) forgive.zRem(key, id);
      await withDeadline(forgive.exec(), COMMAND_TIMEOUT_MS, 'Redis');
    };
    return { waitSeconds: wait, succeeded };
  }

  async visit(ip: string): Promise<number> {
    return waitSeconds((await this.count(visitCountersOf(ip, this.visits), randomUUID())).waitMs);
  }

  async close(): Promise<void> {
    await closeRedisClient(this.client);
  }
}
