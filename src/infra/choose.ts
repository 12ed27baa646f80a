import path from 'node:path';
import type { Config } from '../config.js';
import type { BlobStore } from '../domain/files/blobStore.js';
import { LocalBlobStore } from './blobs/localBlobStore.js';
import { MemoryRateLimiter } from './rateLimit/memoryRateLimiter.js';
import type { RateLimiter, RateLimitSettings } from '../http/rateLimiter.js';
import { MemorySignInThrottle } from './signInThrottle/memorySignInThrottle.js';
import type { SignInThrottle } from '../dashboard/signInThrottle.js';
import type { Db } from '../db/database.js';
import type { Mailer } from '../domain/identity/mailer.js';
import { VerifiedKeyCache, type KeyCacheGuard } from '../domain/apiKeys/keyCache.js';
import { sqliteDataVersionGuard } from './keyCache/sqliteGuard.js';
import { DependencyHealth } from './health.js';

/*
 * The one place that picks local or shared infrastructure from configuration. The Redis client and
 * the AWS SDK are loaded only when configured: together they are about 17 MB of a server's
 * resident memory (measured with process.memoryUsage() after each import) that one machine on
 * SQLite never uses.
 */

/**
 * Rate limits and quotas are counted in Redis with REDIS_URL (shared by every instance; while Redis
 * is unreachable each instance counts alone, see RedisRateLimiter), else in memory.
 */
export async function openRateLimiter(config: Config, health = new DependencyHealth()): Promise<RateLimiter> {
  const settings: RateLimitSettings = {
    burst: config.rateLimitBurst,
    perSecond: config.rateLimitPerSecond,
    dailyQuota: config.dailyQuota,
    sandboxDailyQuota: config.sandboxDailyQuota,
  };
  if (!config.redisUrl) return new MemoryRateLimiter(settings);
  const { RedisRateLimiter } = await import('./rateLimit/redisRateLimiter.js');
  return RedisRateLimiter.connect(config.redisUrl, settings, { health });
}

/**
 * Dashboard sign-in attempts, and requests without a session to pages that store or fetch
 * something, are counted in Redis with REDIS_URL (shared by every instance; while Redis is
 * unreachable they answer 503), else in memory.
 */
export async function openSignInThrottle(config: Config, health = new DependencyHealth()): Promise<SignInThrottle> {
  if (!config.redisUrl) return new MemorySignInThrottle(config.anonymousRequestsPerMinute);
  const { RedisSignInThrottle } = await import('./signInThrottle/redisSignInThrottle.js');
  return RedisSignInThrottle.connect(config.redisUrl, { health, visits: config.anonymousRequestsPerMinute });
}

/** Mail goes out over SMTP with SMTP_URL; without it nothing is mailed (null: links are shown instead). */
export async function openMailer(config: Config): Promise<Mailer | null> {
  if (!config.smtpUrl) return null;
  const { SmtpMailer } = await import('./mail/smtpMailer.js');
  return new SmtpMailer(config.smtpUrl, config.mailFrom);
}

/** File bytes live in an S3-compatible bucket with BLOB_STORE=s3, else under DATA_DIR/files. */
export async function openBlobStore(config: Config): Promise<BlobStore> {
  if (!config.s3) return new LocalBlobStore(path.join(config.dataDir, 'files'));
  const [{ S3BlobStore }, { openS3Client, DOWNLOAD_IDLE_TIMEOUT_MS }] = await Promise.all([
    import('./blobs/s3BlobStore.js'),
    import('./blobs/s3Client.js'),
  ]);
  return new S3BlobStore(openS3Client(config.s3), config.s3.bucket, {
    presignedDownloads: config.s3.presignedDownloads,
    downloads: openS3Client(config.s3, DOWNLOAD_IDLE_TIMEOUT_MS),
  });
}

/**
 * Verified API keys are cached where a revocation anywhere reaches the cache at once (see
 * domain/apiKeys/keyCache.ts): on SQLite through the file's data_version, on PostgreSQL through
 * the revocation feed of Redis when REDIS_URL is set, else of PostgreSQL's LISTEN/NOTIFY (on
 * DATABASE_DIRECT_URL when given; behind a transaction pooler without it, no cache at all).
 */
export async function openKeyCache(config: Config, db: Db, health = new DependencyHealth()): Promise<VerifiedKeyCache> {
  return new VerifiedKeyCache(await openRevocationGuard(config, db, { health }));
}

/**
 * What tells this process of other processes' revocations, and tells them of its own. On
 * PostgreSQL every revocation is sent as a NOTIFY, and through Redis too with REDIS_URL: a server
 * hears Redis when it has REDIS_URL, else the NOTIFY, so a CLI or server configured apart from
 * the others still reaches them. `listen: false` only tells (the CLI).
 */
export async function openRevocationGuard(
  config: Config,
  db: Db,
  options: { listen?: boolean; onUnpublished?: (error: unknown) => void; health?: DependencyHealth } = {},
): Promise<KeyCacheGuard> {
  if (db.dialect === 'sqlite') return sqliteDataVersionGuard(db.kysely);
  const { publishRevocationsOnPostgres, PostgresRevocationFeed } = await import('./keyCache/postgresRevocationFeed.js');
  const stopNotifying = publishRevocationsOnPostgres(db.kysely);
  let guard: KeyCacheGuard;
  if (config.redisUrl) {
    const { RedisRevocationFeed } = await import('./keyCache/redisRevocationFeed.js');
    guard = await RedisRevocationFeed.connect(config.redisUrl, {
      subscribe: options.listen,
      onUnpublished: options.onUnpublished,
      health: options.health,
    });
  } else if (options.listen === false || (config.databasePoolMode === 'transaction' && !config.databaseDirectUrl)) {
    // A LISTEN through a transaction pooler hears nothing: without Redis or a direct URL every
    // request reads its key from the database (revocation stays immediate; the cache is off).
    guard = { usable: () => false };
  } else {
    guard = await PostgresRevocationFeed.connect(db.kysely, config.databaseDirectUrl ?? config.databaseUrl!);
  }
  return {
    register: (cache) => guard.register?.(cache),
    usable: (cache) => guard.usable(cache),
    close: async () => {
      stopNotifying();
      await guard.close?.();
    },
  };
}
