import { randomUUID } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import type { Database } from '../../db/schema.js';
import { postgresTarget, tlsFor } from '../../db/postgresTls.js';
import { onKeysRevoked, type KeyCacheGuard, type VerifiedKeyCache } from '../../domain/apiKeys/keyCache.js';

/** The LISTEN/NOTIFY channel (one per database: a revocation in any schema empties every cache). */
export const PG_REVOCATION_CHANNEL = 'orgdata_keys_revoked';

/** The listening connection's name in pg_stat_activity. */
export const APPLICATION_NAME = 'orgdata revocation feed';
/** What a revocation sends; an echo (see echo) starts with ECHO and is no revocation. */
const REVOKED = '1';
const ECHO = 'echo:';
/** How often the listening connection must answer a query on itself, and how soon. */
const CHECK_MS = 2000;
const CHECK_TIMEOUT_MS = 2000;
/** How soon a connecting listener must hear the NOTIFY it sent through the pool. */
const ECHO_TIMEOUT_MS = 3000;
/** How long connecting (TLS included) may take. */
const CONNECT_TIMEOUT_MS = 5000;
/** A first reconnection after this long, doubling up to RETRY_MAX_MS. */
const RETRY_MS = 250;
const RETRY_MAX_MS = 5000;

/**
 * Sends every revocation this process makes to the other processes on the database as a NOTIFY,
 * awaited, so that the revoking request answers only once it is sent. Every process on
 * PostgreSQL does this, with or without Redis (a server without REDIS_URL hears only this).
 * Returns the function that stops it.
 */
export function publishRevocationsOnPostgres(db: Kysely<Database>): () => void {
  return onKeysRevoked(async () => {
    await sql`select pg_notify(${PG_REVOCATION_CHANNEL}, ${REVOKED})`.execute(db);
  });
}

/**
 * The key cache's guard on PostgreSQL without Redis: one connection of its own, held outside the
 * pool, LISTENs for every process's revocations (publishRevocationsOnPostgres), and each one
 * empties this process's key cache. Written here rather than with a LISTEN library (pg-listen
 * reconnects, but cannot say whether the connection hears at this moment, which the guard must).
 * Like the Redis feed it trusts the cache only while the connection listens: when it fails the
 * cache is emptied and not used until a new connection listens again, and emptied again then (a
 * notification may have been missed meanwhile). A connecting listener must first hear a NOTIFY
 * sent through the pool (echo): a LISTEN that is not told what other sessions send (behind
 * PgBouncer in transaction mode it lands on a server connection the client does not keep) never
 * makes the cache usable. Then a query on the connection every CHECK_MS notices one that died
 * without closing.
 */
export class PostgresRevocationFeed implements KeyCacheGuard {
  private readonly caches = new Set<VerifiedKeyCache>();
  private client: pg.Client | null = null;
  private listening = false;
  private closed = false;
  private retryMs = RETRY_MS;
  private retry: NodeJS.Timeout | null = null;
  private readonly check: NodeJS.Timeout;
  /** The echoes connecting listeners wait for, by payload. */
  private readonly pending = new Map<string, () => void>();

  private constructor(
    private readonly db: Kysely<Database>,
    private readonly connectionString: string,
  ) {
    this.check = setInterval(() => {
      const client = this.client;
      if (client && this.listening) withTimeout(client.query('select 1'), CHECK_TIMEOUT_MS).catch(() => this.lost(client));
    }, CHECK_MS);
    this.check.unref();
  }

  /**
   * Connects to `connectionString` and listens; resolves once it does or has failed a first time
   * (it then tries again, and the cache is not used meanwhile). `db` is the pool the echo is sent
   * through.
   */
  static async connect(db: Kysely<Database>, connectionString: string): Promise<PostgresRevocationFeed> {
    const feed = new PostgresRevocationFeed(db, connectionString);
    await feed.listen();
    return feed;
  }

  /** Opens a listening connection; a failure is handed to lost(), never thrown. */
  private async listen(): Promise<void> {
    const target = postgresTarget(this.connectionString);
    let ssl: Awaited<ReturnType<typeof tlsFor>>;
    try {
      ssl = await tlsFor(target);
    } catch {
      return this.retryLater();
    }
    if (this.closed) return;
    const client = new pg.Client({
      connectionString: target.connectionString,
      ssl,
      keepAlive: true,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      application_name: APPLICATION_NAME,
    });
    this.client = client;
    client.on('error', () => this.lost(client));
    client.on('end', () => this.lost(client));
    client.on('notification', (message) => this.notified(message));
    try {
      await client.connect();
      await client.query(`listen ${PG_REVOCATION_CHANNEL}`);
      await this.echo();
    } catch {
      this.lost(client);
      return;
    }
    if (this.client !== client || this.closed) return void client.end().catch(() => {});
    // Whatever was revoked while nobody listened: start over.
    this.invalidateAll();
    this.listening = true;
    this.retryMs = RETRY_MS;
  }

  /** Sends a NOTIFY through the pool, as a revocation is sent, and waits to hear it. */
  private async echo(): Promise<void> {
    const payload = `${ECHO}${randomUUID()}`;
    const heard = new Promise<void>((resolve) => this.pending.set(payload, resolve));
    try {
      await sql`select pg_notify(${PG_REVOCATION_CHANNEL}, ${payload})`.execute(this.db);
      await withTimeout(heard, ECHO_TIMEOUT_MS);
    } finally {
      this.pending.delete(payload);
    }
  }

  private notified(message: pg.Notification): void {
    const payload = message.payload ?? '';
    if (!payload.startsWith(ECHO)) this.invalidateAll();
    else this.pending.get(payload)?.(); // an echo, maybe another instance's: no revocation
  }

  /** The connection `client` failed: distrust the cache and listen again on a new one. */
  private lost(client: pg.Client): void {
    if (this.client !== client) return;
    this.listening = false;
    this.client = null;
    this.invalidateAll();
    // It tells nothing more; an error it may still raise must not go unhandled.
    client.removeAllListeners('notification');
    client.end().catch(() => {});
    this.retryLater();
  }

  private retryLater(): void {
    if (this.closed || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = null;
      if (!this.closed) void this.listen();
    }, this.retryMs);
    this.retry.unref();
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
  }

  register(cache: VerifiedKeyCache): void {
    this.caches.add(cache);
  }

  usable(): boolean {
    return this.listening;
  }

  private invalidateAll(): void {
    for (const cache of this.caches) cache.invalidate();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listening = false;
    clearInterval(this.check);
    if (this.retry) clearTimeout(this.retry);
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }
}

/** `promise`, or a rejection after `ms` (the timer does not keep the process alive). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
