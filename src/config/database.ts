import { ConfigError } from '../config.js';
import { postgresTarget } from '../db/postgresTls.js';

type Env = Record<string, string | undefined>;

/**
 * A PostgreSQL URL from `name`, or null when unset. libpq's PGSSLMODE and PGSSLROOTCERT are
 * folded into it when it names no sslmode or sslrootcert of its own (as libpq takes them), so
 * that the URL alone says how to connect; its TLS parameters are checked now (db/postgresTls.ts).
 */
export function postgresUrl(env: Env, name: string): string | null {
  const raw = env[name];
  if (raw === undefined || raw === '') return null;
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(name, 'must be a postgres:// URL');
  }
  if (parsed.protocol !== 'postgres:' && parsed.protocol !== 'postgresql:') throw new ConfigError(name, 'must be a postgres:// URL');
  let folded = false;
  for (const [variable, parameter] of [
    ['PGSSLMODE', 'sslmode'],
    ['PGSSLROOTCERT', 'sslrootcert'],
  ] as const) {
    const value = env[variable];
    if (value && !parsed.searchParams.has(parameter)) {
      parsed.searchParams.set(parameter, value);
      folded = true;
    }
  }
  const url = folded ? parsed.toString() : raw;
  try {
    postgresTarget(url);
  } catch (error) {
    if (error instanceof ConfigError && name !== 'DATABASE_URL') throw new ConfigError(name, error.message.replace(/^DATABASE_URL: /, ''));
    throw error;
  }
  return url;
}

/** DATABASE_POOL_MODE: session (default) or transaction (behind a transaction pooler). */
export function poolMode(env: Env): 'session' | 'transaction' {
  const raw = env.DATABASE_POOL_MODE || 'session';
  if (raw !== 'session' && raw !== 'transaction') {
    throw new ConfigError('DATABASE_POOL_MODE', `must be session or transaction (PgBouncer's pool_mode), got "${raw}"`);
  }
  return raw;
}
