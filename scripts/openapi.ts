/**
 * Prints the OpenAPI document exactly as the app serves it at GET /api/v1/openapi.json, so the
 * committed openapi.json can be regenerated (`npm run openapi`) and checked for drift in tests.
 */
import { loadConfig } from '../src/config/load.js';
import { openDatabase } from '../src/db/database.js';
import { buildApp } from '../src/app.js';
import { MemoryRateLimiter } from '../src/infra/rateLimit/memoryRateLimiter.js';

const config = loadConfig({
  PUBLIC_URL: process.env.PUBLIC_URL || 'http://localhost:3000',
  // Nothing is signed while printing the document; any 32+ characters do, and nothing is written.
  SECRET_KEY: 'openapi-generator-secret-not-used-for-anything',
  DATA_DIR: ':memory:',
});
const db = openDatabase({ databaseUrl: null, dataDir: ':memory:' });
const rateLimiter = new MemoryRateLimiter({
  burst: config.rateLimitBurst,
  perSecond: config.rateLimitPerSecond,
  dailyQuota: config.dailyQuota,
});
const app = await buildApp({ config, db, rateLimiter, logger: false });
try {
  const response = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' });
  if (response.statusCode !== 200) throw new Error(`GET /api/v1/openapi.json answered ${response.statusCode}: ${response.body}`);
  process.stdout.write(`${JSON.stringify(response.json(), null, 2)}\n`);
} finally {
  await app.close();
  await rateLimiter.close();
  await db.close();
}
