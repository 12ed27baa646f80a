import { createHash, randomUUID } from 'node:crypto';
import { UnavailableError } from '../../domain/errors.js';
import { withDeadline } from '../deadline.js';
import { DependencyHealth } from '../health.js';
import {
  closeRedisClient,
  COMMAND_TIMEOUT_MS,
  connected,
  openRedisClient,
  runScript,
  STARTUP_WAIT_MS,
  type RedisClient,
} from '../redis/connection.js';
import type { AttemptOptions, SignInAttempt, SignInThrottle } from '../../dashboard/signInThrottle.js';
import { countersOf, waitSeconds, WINDOW_MS } from './counters.js';

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
  ) {}

  static async connect(url: string, options: { prefix?: string; health?: DependencyHealth } = {}): Promise<RedisSignInThrottle> {
    const health = options.health ?? new DependencyHealth();
    const client = openRedisClient(url, 'orgdata-sign-in', { health, use: SIGN_IN_REFUSED });
    await connected(client, STARTUP_WAIT_MS).catch(() => undefined);
    return new RedisSignInThrottle(client, options.prefix ?? 'orgdata:', health);
  }

  async begin(email: string, ip: string, options: AttemptOptions = {}): Promise<SignInAttempt> {
    const counters = countersOf(email, ip, options);
    // Addresses are hashed: the keys carry no e-mail address in clear.
    const keys = counters.map((c) => `${this.prefix}signin:${c.kind}:${createHash('sha256').update(c.subject).digest('base64url')}`);
    const id = randomUUID();
    let reply: unknown;
    try {
      if (!this.client.isReady) throw new Error('not connected');
      reply = await runScript(this.client, this.script, {
        keys,
        arguments: [String(WINDOW_MS), id, ...counters.map((c) => String(c.limit))],
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
    const wait = waitSeconds(Number(reply));
    const succeeded = async () => {
      if (wait > 0) return;
      const forgive = this.client.multi();
      for (const key of keys) forgive.zRem(key, id);
      await withDeadline(forgive.exec(), COMMAND_TIMEOUT_MS, 'Redis');
    };
    return { waitSeconds: wait, succeeded };
  }

  async close(): Promise<void> {
    await closeRedisClient(this.client);
  }
}
