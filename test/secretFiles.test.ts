import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../src/config.js';
import { loadConfig } from '../src/config/load.js';
import { SECRET_SETTINGS } from '../src/config/secrets.js';
import { DIALECTS, SECRET } from './helpers/harness.js';
import { orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';
import { runCli } from './helpers/ssoServer.js';

/** Every secret setting may come from a file (`NAME_FILE`), as Docker and Kubernetes mount secrets. */
const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-secrets-'));
const secretFile = (name: string, content: string) => {
  const file = path.join(dir, name);
  writeFileSync(file, content, { mode: 0o600 });
  return file;
};
const base = { DATA_DIR: path.join(dir, 'data'), SECRET_KEY: SECRET };
const refusal = (env: Record<string, string>) => {
  try {
    loadConfig(env, { createSecret: false });
    return null;
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.message;
  }
};

describe('secret settings read from files (NAME_FILE)', () => {
  it('reads each secret setting from its file, less one trailing line break', () => {
    const config = loadConfig(
      {
        DATA_DIR: base.DATA_DIR,
        SECRET_KEY_FILE: secretFile('secret', `${'k'.repeat(40)}\n`),
        DATABASE_URL_FILE: secretFile('db', 'postgres://orgdata:p%40ss@db.internal:5432/orgdata\r\n'),
        REDIS_URL_FILE: secretFile('redis', 'rediss://default:pw@cache.internal:6380'),
        BLOB_STORE: 's3',
        S3_BUCKET: 'files',
        S3_ACCESS_KEY_ID_FILE: secretFile('s3-id', 'AKIAEXAMPLE\n'),
        S3_SECRET_ACCESS_KEY_FILE: secretFile('s3-secret', 'wJalr/EXAMPLE+KEY\n'),
        SMTP_URL_FILE: secretFile('smtp', 'smtps://mailer:pw@smtp.example.com:465\n'),
        METRICS_TOKEN_FILE: secretFile('metrics', 'abcdefghijklmnopqrstuvwx\n'),
      },
      { createSecret: false },
    );
    expect(config.secretKey).toBe('k'.repeat(40));
    expect(config.secretKeyGiven).toBe(true);
    expect(config.databaseUrl).toBe('postgres://orgdata:p%40ss@db.internal:5432/orgdata');
    expect(config.redisUrl).toBe('rediss://default:pw@cache.internal:6380');
    expect(config.s3?.credentials).toEqual({ accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'wJalr/EXAMPLE+KEY' });
    expect(config.smtpUrl).toBe('smtps://mailer:pw@smtp.example.com:465');
    expect(config.metricsToken).toBe('abcdefghijklmnopqrstuvwx');
  });

  it('refuses both forms at once, and a missing, unreadable, empty, multi-line or huge file, naming the setting', () => {
    for (const name of SECRET_SETTINGS) {
      const message = refusal({
        ...base,
        [name]: 'abcdefghijklmnopqrstuvwxyz0123456789',
        [`${name}_FILE`]: secretFile(`both-${name}`, 'x'),
      });
      expect(message, name).toBe(`${name}_FILE: and ${name} are both set: set one of them (${name}_FILE names a file that holds ${name})`);
    }
    expect(refusal({ ...base, METRICS_TOKEN_FILE: path.join(dir, 'nope') })).toBe(
      `METRICS_TOKEN_FILE: cannot read "${path.join(dir, 'nope')}" (ENOENT)`,
    );
    expect(refusal({ ...base, METRICS_TOKEN_FILE: dir })).toBe(`METRICS_TOKEN_FILE: cannot read "${dir}" (EISDIR)`);
    const empty = secretFile('empty', '\n');
    expect(refusal({ ...base, METRICS_TOKEN_FILE: empty })).toBe(`METRICS_TOKEN_FILE: "${empty}" is empty`);
    const twoLines = secretFile('two-lines', 'abcdefghijklmnopqrstuvwx\nsecond\n');
    expect(refusal({ ...base, METRICS_TOKEN_FILE: twoLines })).toBe(`METRICS_TOKEN_FILE: "${twoLines}" holds more than one line`);
    const huge = secretFile('huge', 'x'.repeat(70_000));
    expect(refusal({ ...base, METRICS_TOKEN_FILE: huge })).toBe(`METRICS_TOKEN_FILE: "${huge}" is larger than 65536 bytes`);
    if (process.getuid?.() !== 0) {
      const locked = secretFile('locked', 'abcdefghijklmnopqrstuvwx');
      chmodSync(locked, 0o000);
      expect(refusal({ ...base, METRICS_TOKEN_FILE: locked })).toBe(`METRICS_TOKEN_FILE: cannot read "${locked}" (EACCES)`);
    }
    // A value read from a file is checked as the variable would be.
    expect(refusal({ ...base, METRICS_TOKEN_FILE: secretFile('short', 'short\n') })).toMatch(/^METRICS_TOKEN: must be 16 to 256/);
  });
});

describe.each(DIALECTS)('a server on %s started with its secrets in files', (dialect) => {
  let env: ServerEnv;
  let server: Awaited<ReturnType<typeof startServerProcess>> | undefined;
  afterAll(async () => {
    server?.child.kill('SIGTERM');
    await server?.exited;
    await env?.dispose();
  });

  it(
    'serves the API and /metrics with SECRET_KEY_FILE, DATABASE_URL_FILE and METRICS_TOKEN_FILE, and refuses both forms at start',
    { timeout: 120_000 },
    async () => {
      env = await serverEnv(dialect);
      const token = 'metrics-token-from-a-file-0123';
      const files: Record<string, string> = {
        SECRET_KEY_FILE: secretFile(`server-secret-${dialect}`, `${SECRET}\n`),
        METRICS_TOKEN_FILE: secretFile(`server-metrics-${dialect}`, `${token}\n`),
      };
      if (env.env.DATABASE_URL) files.DATABASE_URL_FILE = secretFile(`server-db-${dialect}`, `${env.env.DATABASE_URL}\n`);
      const { SECRET_KEY: _key, DATABASE_URL: _url, ...rest } = env.env;
      env.env = { ...rest, ...files };
      const { key } = await orgWithKey(env.env);
      server = await startServerProcess(env);
      const listed = await fetch(`${env.url}/api/v1/contacts`, { headers: { authorization: `Bearer ${key}` } });
      expect(listed.status).toBe(200);
      expect((await fetch(`${env.url}/metrics`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
      expect((await fetch(`${env.url}/metrics`, { headers: { authorization: 'Bearer wrong-token-0123456789' } })).status).toBe(401);

      const both = await runCli({ ...env.env, SECRET_KEY: SECRET }, ['serve']);
      expect(both.code).not.toBe(0);
      expect(both.stderr).toContain('SECRET_KEY_FILE: and SECRET_KEY are both set');
    },
  );
});
