import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ConfigError } from '../config.js';

/** The secrets among the settings: SECRET_KEY's value (or its generated file), and the `NAME_FILE` form of each secret setting. */

type Env = Record<string, string | undefined>;

/**
 * The settings that hold a secret. Each may instead name a file that holds it, as `NAME_FILE`
 * (Docker and Kubernetes mount secrets as files): the file's content, less one trailing line break,
 * is the value. Setting both is refused: which one wins would be a guess.
 */
export const SECRET_SETTINGS = [
  'SECRET_KEY',
  'DATABASE_URL',
  'DATABASE_DIRECT_URL',
  'REDIS_URL',
  'S3_ACCESS_KEY_ID',
  'S3_SECRET_ACCESS_KEY',
  'SMTP_URL',
  'METRICS_TOKEN',
] as const;

/** A secret file larger than this is not a secret setting (a wrong path, say a log). */
const SECRET_FILE_MAX_BYTES = 64 * 1024;

/** `env` with every `NAME_FILE` of SECRET_SETTINGS read into `NAME` (and `NAME_FILE` dropped). */
export function withSecretFiles(env: Env): Env {
  const resolved: Env = { ...env };
  for (const name of SECRET_SETTINGS) {
    const file = env[`${name}_FILE`];
    delete resolved[`${name}_FILE`];
    if (file === undefined || file === '') continue;
    if (env[name] !== undefined && env[name] !== '') {
      throw new ConfigError(`${name}_FILE`, `and ${name} are both set: set one of them (${name}_FILE names a file that holds ${name})`);
    }
    let content: Buffer;
    try {
      content = readFileSync(file);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
      throw new ConfigError(`${name}_FILE`, `cannot read "${file}" (${code})`);
    }
    if (content.length > SECRET_FILE_MAX_BYTES)
      throw new ConfigError(`${name}_FILE`, `"${file}" is larger than ${SECRET_FILE_MAX_BYTES} bytes`);
    const value = content.toString('utf8').replace(/\r?\n$/, '');
    if (value === '') throw new ConfigError(`${name}_FILE`, `"${file}" is empty`);
    if (/[\r\n]/.test(value)) throw new ConfigError(`${name}_FILE`, `"${file}" holds more than one line`);
    resolved[name] = value;
  }
  return resolved;
}

/**
 * SECRET_KEY signs cursors, upload links and keys' hashes; generated once into DATA_DIR when unset
 * (by the server and `orgdata migrate` only: any other command finding none is pointed at the
 * wrong DATA_DIR, and a new secret there would only hide that).
 */
export function secretKey(env: Env, dataDir: string, create: boolean): string {
  const raw = env.SECRET_KEY;
  if (raw !== undefined && raw !== '') {
    if (raw.length < 32) throw new ConfigError('SECRET_KEY', 'must be at least 32 characters long');
    return raw;
  }
  const file = path.join(dataDir, 'secret.key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  if (!create) {
    throw new ConfigError(
      'SECRET_KEY',
      `is not set and there is no ${file}: no orgdata data was found there. Point DATA_DIR at the directory the server uses ` +
        '(or set SECRET_KEY and DATABASE_URL as the server has them), or start the server once (npm start) to create it.',
    );
  }
  mkdirSync(dataDir, { recursive: true });
  const generated = randomBytes(32).toString('base64url');
  writeFileSync(file, generated + '\n', { mode: 0o600, flag: 'wx' });
  return generated;
}
