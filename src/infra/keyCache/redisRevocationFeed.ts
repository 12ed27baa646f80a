import { createClient, type RedisClientType } from '@redis/client';
import { onKeysRevoked, type KeyCacheGuard, type VerifiedKeyCache } from '../../domain/apiKeys/keyCache.js';

export const REVOCATION_CHANNEL = 'orgdata:keys-revoked';

/**
 * Revocations across processes through Redis pub/sub (several instances over PostgreSQL): every
 * revocation made in this process is published (awaited, so the revoking request answers only
 * once every instance has been told), and every message received empties this process's key
 * cache. As a guard it trusts the cache only while the subscription is up: while it is down a
 * message could be missed, so the cache is emptied when the connection drops and again when it
 * is back (node-redis resubscribes before it reports ready), and is not used in between.
 * A PING every few seconds notices a connection that died without closing.
 */
export class RedisRevocationFeed implements KeyCacheGuard {
  private readonly caches = new Set<VerifiedKeyCache>();
  private readonly stopPublishing: () => void;

  private constructor(
    private readonly publisher: RedisClientType,
    private readonly subscriber: RedisClientType,
  ) {
    this.stopPublishing = onKeysRevoked(() => this.publish());
    const drop = () => this.invalidateAll();
    for (const event of ['error', 'end', 'reconnecting', 'ready']) subscriber.on(event, drop);
  }

  /** Connects and subscribes; `subscribe: false` for a process that only revokes (the CLI). */
  static async connect(url: string, options: { subscribe?: boolean } = {}): Promise<RedisRevocationFeed> {
    const publisher: RedisClientType = createClient({ url });
    publisher.on('error', () => {
      // Reconnection is automatic; a revocation made meanwhile fails to publish and says so.
    });
    await publisher.connect();
    const subscriber: RedisClientType = publisher.duplicate({ pingInterval: 5000 });
    const feed = new RedisRevocationFeed(publisher, subscriber);
    if (options.subscribe !== false) {
      await subscriber.connect();
      await subscriber.subscribe(REVOCATION_CHANNEL, () => feed.invalidateAll());
    }
    return feed;
  }

  register(cache: VerifiedKeyCache): void {
    this.caches.add(cache);
  }

  usable(): boolean {
    return this.subscriber.isReady;
  }

  private invalidateAll(): void {
    for (const cache of this.caches) cache.invalidate();
  }

  private async publish(): Promise<void> {
    await this.publisher.publish(REVOCATION_CHANNEL, '1');
  }

  async close(): Promise<void> {
    this.stopPublishing();
    await Promise.all([this.publisher.close(), this.subscriber.isOpen ? this.subscriber.close() : undefined]);
  }
}
