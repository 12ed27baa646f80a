import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import type { Database } from '../../db/schema.js';
import { onKeysRevoked, type KeyCacheGuard, type VerifiedKeyCache } from '../../domain/apiKeys/keyCache.js';

/** The LISTEN/NOTIFY channel (one per database: a revocation in any schema empties every cache). */
export const PG_REVOCATION_CHANNEL = 'orgdata_keys_revoked';

/** The listening connection's name in pg_stat_activity. */
export const APPLICATION_NAME = 'orgdata revocation feed';
/** What a revocation sends; an echo (see echo) starts with ECHO and is no revocation. */
const REVOKED = '1';
const ECHO = 'echo:';
/** How often the listening connection proves it still hears (a dead peer may not close it). */
const CHECK_MS = 5000;
const ECHO_TIMEOUT_MS = 3000;
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
 * meanwhile, so the cache is emptied again then). The connection must also prove, on connecting
 * and every few seconds, that it hears a NOTIFY sent through the pool (echo).
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

  /** The echo each listening connection waits for (see echo). */
  private readonly pending = new Map<string, () => void>();

  private constructor(
    private readonly db: Kysely<Database>,
    private readonly connectionString: string,
  ) {
    this.stopPublishing = onKeysRevoked(async () => {
      await sql`select pg_notify(${PG_REVOCATION_CHANNEL}, ${REVOKED})`.execute(db);
    });
    this.check = setInterval(() => {
      const client = this.client;
      if (client && this.listening) this.echo(client).catch(() => this.lost(client));
    }, CHECK_MS);
    this.check.unref();
  }

  /**
   * Sends a NOTIFY through the pool, as a revocation is sent, and waits for `client` to receive it:
   * proof that this connection hears what other sessions send. A connection that listens but is not
   * told (behind PgBouncer in transaction mode, a LISTEN lands on a server connection the client
   * does not keep) fails here, and the cache is not used. Done on connecting and every CHECK_MS,
   * which also notices a connection that died without closing.
   */
  private async echo(client: pg.Client): Promise<void> {
    const payload = `${ECHO}${randomUUID()}`;
    let timer: NodeJS.Timeout | undefined;
    const heard = new Promise<void>((resolve, reject) => {
      this.pending.set(payload, resolve);
      timer = setTimeout(() => reject(new Error('the revocation feed did not hear its own NOTIFY')), ECHO_TIMEOUT_MS);
      timer.unref();
    });
    heard.catch(() => {}); // it may time out while the NOTIFY is still waiting for the pool
    try {
      await sql`select pg_notify(${PG_REVOCATION_CHANNEL}, ${payload})`.execute(this.db);
      await heard;
    } finally {
      clearTimeout(timer);
      this.pending.delete(payload);
    }
    if (this.client !== client) throw new Error('the connection was replaced');
  }

  private notified(message: pg.Notification): void {
    const echo = message.payload?.startsWith(ECHO) ? this.pending.get(message.payload) : undefined;
    if (echo) echo();
    // Another instance's echo is no revocation; anything else is (never miss one).
    else if (!message.payload?.startsWith(ECHO)) this.invalidateAll();
  }

  /**
   * Publishes this process's revocations through `db`; with `listen` (the default) also connects
   * to `connectionString` and listens, resolving once it does or has failed a first time (then it
   * tries again, and the cache is not used meanwhile).
   * `listen: false` is for a process that only revokes (the CLI).
   */
  static async connect(
    db: Kysely<Database>,
    connectionString: string,
    options: { listen?: boolean } = {},
  ): Promise<PostgresRevocationFeed> {
    const feed = new PostgresRevocationFeed(db, connectionString);
    if (options.listen === false) return feed;
    // Not listening yet (PostgreSQL unreachable, or not echoing): no cache until it does.
    await feed.listen().catch(() => feed.client && feed.lost(feed.client));
    return feed;
  }

  private async listen(): Promise<void> {
    const client = new pg.Client({ connectionString: this.connectionString, keepAlive: true, application_name: APPLICATION_NAME });
    this.client = client;
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    client.on('notification', (message) => this.notified(message));
    await client.connect();
    await client.query(`listen ${PG_REVOCATION_CHANNEL}`);
    await this.echo(client);
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
