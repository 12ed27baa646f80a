import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import type { Database } from '../../db/schema.js';
import { onKeysRevoked, type KeyCacheGuard, type VerifiedKeyCache } from '../../domain/apiKeys/keyCache.js';

/** The LISTEN/NOTIFY channel (one per database: a revocation in any schema empties every cache). */
export const PG_REVOCATION_CHANNEL = 'orgdata_keys_revoked';

/** The listening connection's name in pg_stat_activity. */
export const APPLICATION_NAME = 'orgdata revocation feed';
/** How often the listening connection is checked with a query (a dead peer may not close it). */
const CHECK_MS = 5000;
/** A first reconnection after this long, doubling up to RETRY_MAX_MS. */
const RETRY_MS = 250;
const RETRY_MAX_MS = 5000;

/**
 * Revocations across processes through PostgreSQL's LISTEN/NOTIFY, when there is no Redis (one
 * instance and the operator CLI, or several): every revocation made in this process is sent as a
 * NOTIFY (awaited, so the revoking request answers only once it is sent), and one connection of
 * the feed's own, held outside the pool, LISTENs: each notification empties this process's key
 * cache. Written here because no library keeps a LISTEN connection for us. Like the Redis
 * feed, it trusts the cache only while the connection listens: when it fails the cache is
 * emptied and not used until a new connection listens again (a notification may have been missed
 * meanwhile, so the cache is emptied again then). A query every few seconds notices a connection
 * that died without closing.
 */
export class PostgresRevocationFeed implements KeyCacheGuard {
  private readonly caches = new Set<VerifiedKeyCache>();
  private client: pg.Client | null = null;
  private listening = false;
  private closed = false;
  private retryMs = RETRY_MS;
  private retry: NodeJS.Timeout | null = null;
  private readonly check: NodeJS.Timeout;
  private readonly stopPublishing: () => void;

  private constructor(
    db: Kysely<Database>,
    private readonly connectionString: string,
  ) {
    this.stopPublishing = onKeysRevoked(async () => {
      await sql`select pg_notify(${PG_REVOCATION_CHANNEL}, '1')`.execute(db);
    });
    this.check = setInterval(() => {
      const client = this.client;
      if (client && this.listening) client.query('select 1').catch(() => this.lost(client));
    }, CHECK_MS);
    this.check.unref();
  }

  /**
   * Publishes this process's revocations through `db`; with `listen` (the default) also connects
   * to `connectionString` and listens, resolving once it does (a first failure is thrown).
   * `listen: false` is for a process that only revokes (the CLI).
   */
  static async connect(
    db: Kysely<Database>,
    connectionString: string,
    options: { listen?: boolean } = {},
  ): Promise<PostgresRevocationFeed> {
    const feed = new PostgresRevocationFeed(db, connectionString);
    if (options.listen === false) return feed;
    try {
      await feed.listen();
    } catch (error) {
      await feed.close();
      throw error;
    }
    return feed;
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, keepAlive: true, application_name: APPLICATION_NAME });
    this.client = client;
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    client.on('notification', () => this.invalidateAll());
    await client.connect();
    await client.query(`listen ${PG_REVOCATION_CHANNEL}`);
    if (this.client !== client || this.closed) return void client.end().catch(() => {});
    // Whatever was revoked while nobody listened: start over.
    this.invalidateAll();
    this.listening = true;
    this.retryMs = RETRY_MS;
  }

  /** The connection `client` failed: distrust the cache and listen again on a new one. */
  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.listening = false;
    this.client = null;
    this.invalidateAll();
    client.end().catch(() => {});
    if (this.closed || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      if (this.closed) return;
      this.listen().catch(() => {
        if (this.client) this.lost(this.client);
      });
      this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    }, this.retryMs);
    this.retry.unref();
  }

  usable(cache: VerifiedKeyCache): boolean {
    this.caches.add(cache);
    return this.listening;
  }

  private invalidateAll(): void {
    for (const cache of this.caches) cache.invalidate();
  }

  async close(): Promise<void> {
    this.stopPublishing();
    this.closed = true;
    this.listening = false;
    clearInterval(this.check);
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}
