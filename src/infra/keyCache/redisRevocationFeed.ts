import { onKeysRevoked, type KeyCacheGuard, type VerifiedKeyCache } from '../../domain/apiKeys/keyCache.js';
import { DependencyHealth } from '../health.js';
import { closeRedisClient, openRedisClient, startupCheck, type RedisClient } from '../redis/connection.js';

export const REVOCATION_CHANNEL = 'orgdata:keys-revoked';

export interface RedisRevocationFeedOptions {
  /** false for a process that only revokes (the CLI): it publishes and never listens. */
  subscribe?: boolean;
  /**
   * Told when a revocation of this process could not be published (Redis unreachable): the
   * revocation itself has committed; the server logs it, the CLI says so.
   */
  onUnpublished?: (error: unknown) => void;
  /** Where a server notes that it cannot publish, or listen, for /readyz and its log. */
  health?: DependencyHealth;
}

const UNPUBLISHED = 'revocations are not published to other instances (each one that cannot reach Redis either has its key cache off)';
const NOT_LISTENING = "other instances' revocations are not heard: API keys are read from the database on every request";

/**
 * Revocations across processes through Redis pub/sub (several instances over PostgreSQL): every
 * revocation made in this process is published (awaited, bounded by the command timeout), and
 * every message received empties this process's key cache. As a guard it trusts the cache only
 * while the subscription is up: while it is down a message could be missed, so the cache is
 * emptied when the connection drops and again when it is back (node-redis resubscribes before it
 * reports ready), and is not used in between. The connection PINGs every second and is dropped
 * after 3 s of silence (redis/connection.ts), so a Redis that stalls turns the cache off within
 * about 3 s.
 *
 * A publish that fails (Redis unreachable) does not fail the revocation, which has committed:
 * every other instance's subscription is then failing too, so their caches are off (and emptied
 * when Redis is back); only an instance that still reaches Redis while this one cannot keeps its
 * cached keys, until the cache's 60-second backstop.
 */
export class RedisRevocationFeed implements KeyCacheGuard {
  private readonly caches = new Set<VerifiedKeyCache>();
  private readonly stopPublishing: () => void;
  private subscribed = false;

  private constructor(
    private readonly publisher: RedisClient,
    private readonly subscriber: RedisClient | null,
    private readonly onUnpublished: (error: unknown) => void,
  ) {
    this.stopPublishing = onKeysRevoked(() => this.publish());
    if (subscriber) {
      const drop = () => this.invalidateAll();
      for (const event of ['error', 'end', 'reconnecting']) subscriber.on(event, drop);
      subscriber.on('ready', () => {
        this.invalidateAll();
        // The first subscription, once Redis is reachable; node-redis renews it on every reconnection.
        if (!this.subscribed) this.trySubscribe();
      });
    }
  }

  /** Connects (waiting a moment, not more: without Redis the cache stays off until it is back). */
  static async connect(url: string, options: RedisRevocationFeedOptions = {}): Promise<RedisRevocationFeed> {
    const health = options.health ?? new DependencyHealth();
    const publisher = openRedisClient(url, 'orgdata-revocations', { health, use: UNPUBLISHED });
    const subscriber = options.subscribe === false ? null : openRedisClient(url, 'orgdata-revocation-feed', { health, use: NOT_LISTENING });
    const onUnpublished = (error: unknown) => {
      health.failed('redis', UNPUBLISHED, error);
      options.onUnpublished?.(error);
    };
    const feed = new RedisRevocationFeed(publisher, subscriber, onUnpublished);
    const clients = [publisher, ...(subscriber ? [subscriber] : [])];
    try {
      await Promise.all(clients.map((client) => startupCheck(client)));
    } catch (error) {
      for (const client of clients) if (client.isOpen) client.destroy();
      throw error;
    }
    if (subscriber?.isReady && !feed.subscribed) await feed.subscribe();
    return feed;
  }

  private trySubscribe(): void {
    this.subscribe().catch(() => {
      // Failed on a connection that just dropped: the next 'ready' tries again.
    });
  }

  private async subscribe(): Promise<void> {
    await this.subscriber!.subscribe(REVOCATION_CHANNEL, () => this.invalidateAll());
    this.subscribed = true;
    this.invalidateAll();
  }

  register(cache: VerifiedKeyCache): void {
    this.caches.add(cache);
  }

  usable(): boolean {
    return this.subscribed && this.subscriber !== null && this.subscriber.isReady;
  }

  private invalidateAll(): void {
    for (const cache of this.caches) cache.invalidate();
  }

  private async publish(): Promise<void> {
    try {
      if (!this.publisher.isReady) throw new Error('Redis is not connected');
      await this.publisher.publish(REVOCATION_CHANNEL, '1');
    } catch (error) {
      this.onUnpublished(error);
    }
  }

  async close(): Promise<void> {
    this.stopPublishing();
    await Promise.all([closeRedisClient(this.publisher), this.subscriber ? closeRedisClient(this.subscriber) : undefined]);
  }
}
