import { ConfigError, type Config } from '../config.js';

/**
 * The settings that share state between instances, as they read in the environment: Redis's
 * counters and revocation feed, the bucket's files. Set, they say "several instances"; over SQLite
 * every instance would keep its own records in its own DATA_DIR (in a container, lost with it)
 * while reporting ready, and a file's bytes would outlive its record on another replica.
 *
 * WEBHOOK_WORKER=false (an API-only instance) is not among them: it shares nothing and splits no
 * data (deliveries queue in the one database, shown in the dashboard), and one instance uses it to
 * measure the write path alone (bench/webhooks.ts); without DATABASE_URL it is warned about
 * (webhookWorkerWarning).
 */
export function severalInstanceSettings(config: Config): string[] {
  const settings: string[] = [];
  if (config.redisUrl) settings.push('REDIS_URL');
  if (config.blobStore === 's3') settings.push('BLOB_STORE=s3');
  return settings;
}

/**
 * `orgdata serve` refuses a half-configured cluster: a several-instance setting without
 * DATABASE_URL. Only the server checks this: the operator CLI acts on the data wherever it is, and
 * moving a SQLite installation that had such settings to PostgreSQL needs `orgdata export` (and
 * `backup`) to read it with them still set.
 */
export function refuseHalfConfiguredCluster(config: Config): void {
  if (config.databaseUrl) return;
  const settings = severalInstanceSettings(config);
  if (settings.length === 0) return;
  const named = settings.join(', ');
  throw new ConfigError(
    'DATABASE_URL',
    `is required with ${named}: ${settings.length > 1 ? 'they are settings' : 'it is a setting'} for several instances, ` +
      'which must share one PostgreSQL database (on SQLite each instance would keep its own data in its own DATA_DIR). ' +
      `Set DATABASE_URL (or DATABASE_URL_FILE) to a postgres:// URL, or unset ${named} to run one instance on SQLite.`,
  );
}

/** What `orgdata serve` logs when it sends no webhook and, on SQLite, no other instance can. */
export function webhookWorkerWarning(config: Config): string | null {
  if (config.webhookWorker || config.databaseUrl) return null;
  return 'WEBHOOK_WORKER=false on SQLite: this instance sends no webhook deliveries and no other instance shares its database, so they stay queued';
}
