import { createClient, type RedisClientType } from '@redis/client';
import { ConfigError } from '../../config.js';
import { withDeadline } from '../deadline.js';
import type { DependencyHealth } from '../health.js';

/**
 * How orgdata talks to Redis, for every use (rate limits, sign-in throttling, revocations): never
 * without a deadline, so that Redis failing or stalling can never hang a request.
 *
 * - No offline queue: a command sent while the connection is down fails at once instead of
 *   waiting, without bound, for Redis to come back.
 * - Every command has COMMAND_TIMEOUT_MS to be answered.
 * - The connection PINGs every PING_INTERVAL_MS, and a connection silent for SOCKET_IDLE_MS is
 *   dropped: a Redis that accepts connections but never answers (stopped, overloaded, a dead
 *   peer behind a live TCP connection) is noticed within that time, after which commands fail at
 *   once rather than each waiting out its timeout.
 * - It reconnects by itself, forever, with a back-off capped at RECONNECT_MAX_MS: Redis coming
 *   back restores everything without a restart.
 * - The first connection is not awaited by whoever opens it: a server whose Redis is down at start
 *   starts anyway, in the state it would be in had Redis gone down later.
 */
export const COMMAND_TIMEOUT_MS = 1_000;
const CONNECT_TIMEOUT_MS = 2_000;
const PING_INTERVAL_MS = 1_000;
const SOCKET_IDLE_MS = 3_000;
const RECONNECT_MAX_MS = 2_000;
/** How long a starting process waits for its first connection before going on without Redis. */
export const STARTUP_WAIT_MS = 2_000;

export type RedisClient = RedisClientType;

/**
 * A client that starts connecting now, in the background (see above). With `health`, its
 * connection failures mark Redis as unreachable for `use` and its reconnection as reachable again.
 */
export function openRedisClient(url: string, name: string, health?: { health: DependencyHealth; use: string }): RedisClient {
  const client: RedisClient = createClient({
    url,
    name,
    disableOfflineQueue: true,
    pingInterval: PING_INTERVAL_MS,
    commandOptions: { timeout: COMMAND_TIMEOUT_MS },
    socket: {
      connectTimeout: CONNECT_TIMEOUT_MS,
      socketTimeout: SOCKET_IDLE_MS,
      reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, RECONNECT_MAX_MS) + Math.floor(Math.random() * 100),
    },
  });
  // Every failure is also the rejection of the command that met it, which its user handles; the
  // client reconnects by itself. Without a listener an 'error' event would end the process.
  client.on('error', (error: unknown) => health?.health.failed('redis', health.use, error));
  if (health) client.on('ready', () => health.health.recovered('redis', health.use));
  startConnecting(client);
  return client;
}

/** Connects in the background; connect() resolves once connected and keeps retrying until then. */
function startConnecting(client: RedisClient): void {
  client.connect().catch(() => {
    // Only when the client is closed before it ever connected.
  });
}

/**
 * Resolves once `client` is connected, or rejects after `ms` (for a process that must know now).
 * Redis refusing the credentials (a wrong password or ACL user, none given to a Redis that wants
 * one), or its TLS certificate failing verification, rejects at once with a ConfigError: that is
 * no outage to wait out, and a server must not start on it (see startupCheck).
 */
export async function connected(client: RedisClient, ms: number): Promise<void> {
  if (client.isReady) return;
  await new Promise<void>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      client.off('ready', ready);
      client.off('error', failed);
    };
    const timer = setTimeout(() => {
      done();
      reject(new Error(`Redis did not answer within ${ms} ms`));
    }, ms);
    const ready = () => {
      done();
      resolve();
    };
    const failed = (error: unknown) => {
      const refused = misconfigured(error);
      if (!refused) return;
      done();
      reject(refused);
    };
    client.once('ready', ready);
    client.on('error', failed);
  });
}

const TLS_REFUSALS = new Set([
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_HAS_EXPIRED',
]);

/** `error` as a ConfigError on REDIS_URL when it is Redis refusing our credentials or TLS failing verification, else null. */
export function misconfigured(error: unknown): ConfigError | null {
  const { message, code } = (error ?? {}) as { message?: unknown; code?: unknown };
  const text = typeof message === 'string' ? message : String(error);
  if (/^(WRONGPASS|NOAUTH)\b|^ERR AUTH\b|^ERR invalid password/.test(text)) {
    return new ConfigError(
      'REDIS_URL',
      `Redis authentication failed (${text.trim()}): check the user name and password in REDIS_URL (redis://:password@host or rediss://user:password@host)`,
    );
  }
  if (typeof code === 'string' && TLS_REFUSALS.has(code)) {
    return new ConfigError('REDIS_URL', `Redis's TLS certificate was refused (${text}); give its CA with NODE_EXTRA_CA_CERTS`);
  }
  return null;
}

/**
 * The first wait of a starting process for `client` (STARTUP_WAIT_MS at most): Redis being
 * unreachable is no reason not to start (the process starts degraded, and recovers when Redis is
 * back), but wrong credentials or a refused certificate are: the client is closed and the
 * ConfigError thrown.
 */
export async function startupCheck(client: RedisClient): Promise<void> {
  try {
    await connected(client, STARTUP_WAIT_MS);
  } catch (error) {
    if (!(error instanceof ConfigError)) return;
    if (client.isOpen) client.destroy();
    throw error;
  }
}

/** How long a close may take: the commands under way (each within its timeout), then QUIT. */
const CLOSE_TIMEOUT_MS = 2 * COMMAND_TIMEOUT_MS;

/**
 * Closes without waiting for a Redis that may not answer. A client without a connection (Redis
 * down) simply stops. A connected one lets the commands under way finish and sends QUIT; when
 * that is not done within CLOSE_TIMEOUT_MS (Redis stalled) its connection is cut and the close
 * rejects, so that a shutdown can say it did not close cleanly. (The deadline's timer is not
 * unref'd: were it the last thing left, Node would exit mid-shutdown.)
 */
export async function closeRedisClient(client: RedisClient): Promise<void> {
  if (!client.isOpen) return;
  if (!client.isReady) {
    client.destroy();
    return;
  }
  const closing = client.close();
  try {
    await withDeadline(closing, CLOSE_TIMEOUT_MS, 'Redis (closing the connection)');
  } catch (error) {
    closing.catch(() => undefined);
    if (client.isOpen) client.destroy();
    throw error;
  }
}

/** Runs a Lua script by its SHA1, loading it first when Redis does not know it (after a restart). */
export async function runScript(
  client: RedisClient,
  script: { text: string; sha?: string },
  options: { keys: string[]; arguments: string[] },
): Promise<unknown> {
  try {
    script.sha ??= await client.scriptLoad(script.text);
    return await client.evalSha(script.sha, options);
  } catch (error) {
    if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error;
    return client.eval(script.text, options);
  }
}
