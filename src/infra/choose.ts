import path from 'node:path';
import type { Config } from '../config.js';
import type { BlobStore } from './blobs/blobStore.js';
import { LocalBlobStore } from './blobs/localBlobStore.js';
import { S3BlobStore } from './blobs/s3BlobStore.js';
import { openS3Client } from './blobs/s3Client.js';
import { MemoryRateLimiter } from './rateLimit/memoryRateLimiter.js';
import type { RateLimiter, RateLimitSettings } from './rateLimit/rateLimiter.js';
import { RedisRateLimiter } from './rateLimit/redisRateLimiter.js';
import { MemorySignInThrottle } from './signInThrottle/memorySignInThrottle.js';
import { RedisSignInThrottle } from './signInThrottle/redisSignInThrottle.js';
import type { SignInThrottle } from './signInThrottle/signInThrottle.js';
import type { Db } from '../db/database.js';
import { VerifiedKeyCache } from '../domain/apiKeys/keyCache.js';
import { sqliteDataVersionGuard } from './keyCache/sqliteGuard.js';
import { RedisRevocationFeed } from './keyCache/redisRevocationFeed.js';

/** The one place that picks local or shared infrastructure from configuration. */
export async function openRateLimiter(config: Config): Promise<RateLimiter> {
  const settings: RateLimitSettings = { burst: config.rateLimitBurst, perSecond: config.rateLimitPerSecond, dailyQuota: config.dailyQuota };
  return config.redisUrl ? RedisRateLimiter.connect(config.redisUrl, settings) : new MemoryRateLimiter(settings);
}

/** Dashboard sign-in attempts are counted in Redis with REDIS_URL (shared by every instance), else in memory. */
export async function openSignInThrottle(config: Config): Promise<SignInThrottle> {
  return config.redisUrl ? RedisSignInThrottle.connect(config.redisUrl) : new MemorySignInThrottle();
}

/** File bytes live in an S3-compatible bucket with BLOB_STORE=s3, else under DATA_DIR/files. */
export function openBlobStore(config: Config): BlobStore {
  if (config.s3) return new S3BlobStore(openS3Client(config.s3), config.s3.bucket, { presignedDownloads: config.s3.presignedDownloads });
  return new LocalBlobStore(path.join(config.dataDir, 'files'));
}

/**
 * Verified API keys are cached where a revocation anywhere reaches the cache at once (see
 * domain/apiKeys/keyCache.ts): on SQLite, and on PostgreSQL with REDIS_URL (the revocation feed).
 * PostgreSQL without Redis has no cache: another process's revocation could not reach it.
 */
export async function openKeyCache(config: Config, db: Db): Promise<VerifiedKeyCache | undefined> {
  if (db.dialect === 'sqlite') return new VerifiedKeyCache(sqliteDataVersionGuard(db.kysely));
  if (config.redisUrl) return new VerifiedKeyCache(await RedisRevocationFeed.connect(config.redisUrl));
  return undefined;
}
