import path from 'node:path';
import type { Config } from '../config.js';
import type { BlobStore } from './blobs/blobStore.js';
import { LocalBlobStore } from './blobs/localBlobStore.js';
import { MemoryRateLimiter } from './rateLimit/memoryRateLimiter.js';
import type { RateLimiter, RateLimitSettings } from './rateLimit/rateLimiter.js';
import { RedisRateLimiter } from './rateLimit/redisRateLimiter.js';

/** The one place that picks local or shared infrastructure from configuration. */
export async function openRateLimiter(config: Config): Promise<RateLimiter> {
  const settings: RateLimitSettings = { burst: config.rateLimitBurst, perSecond: config.rateLimitPerSecond, dailyQuota: config.dailyQuota };
  return config.redisUrl ? RedisRateLimiter.connect(config.redisUrl, settings) : new MemoryRateLimiter(settings);
}

/** File bytes live under DATA_DIR/files (an S3-compatible store would be chosen here). */
export function openBlobStore(config: Config): BlobStore {
  return new LocalBlobStore(path.join(config.dataDir, 'files'));
}
