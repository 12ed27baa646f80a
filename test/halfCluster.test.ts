import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { cli, serverEnv } from './helpers/serverProcess.js';
import { cliEntry } from './helpers/cliEntry.js';

/**
 * Issue 43, item 2: a several-instance setting (REDIS_URL, BLOB_STORE=s3) without DATABASE_URL
 * used to start on SQLite in DATA_DIR and report ready, each replica keeping its own data. Now
 * `orgdata serve` exits at once, non-zero, naming DATABASE_URL and the setting that asked for it,
 * before it opens the database or listens. The real server process, as the operator starts it.
 */
const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));
/** Nothing listens there: the refusal comes before any connection (the old code started anyway). */
const NOWHERE = { redis: 'redis://127.0.0.1:1', s3: { BLOB_STORE: 's3', S3_BUCKET: 'orgdata-files', S3_ENDPOINT: 'http://127.0.0.1:1' } };

interface Outcome {
  /** The exit code, or `listening` when the server answered /healthz instead (then it is killed). */
  result: number | 'listening';
  output: string;
}

/**
 * Starts `orgdata serve` and waits for whichever comes first: its exit or its /healthz answer
 * (then, with `until`, for that text in its output, before it is killed).
 */
async function serve(extra: Record<string, string>, args: string[] = [], until?: string): Promise<Outcome & { dataDir: string }> {
  const env = await serverEnv('sqlite', extra);
  const child = spawn(process.execPath, [...CLI, 'serve', ...args], { env: env.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number>((resolve) => child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : -1))));
  let exitCode: number | null = null;
  void exited.then((code) => (exitCode = code));
  const deadline = Date.now() + 30_000;
  while (exitCode === null && Date.now() < deadline) {
    const answered = await fetch(`${env.url}/healthz`).then(
      (res) => res.ok,
      () => false,
    );
    if (answered) {
      if (until) await expect.poll(() => output, { timeout: 10_000 }).toContain(until);
      child.kill('SIGKILL');
      await exited;
      return { result: 'listening', output, dataDir: env.env.DATA_DIR! };
    }
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 100))]);
  }
  if (exitCode === null) child.kill('SIGKILL');
  const result = await exited;
  // Nothing answers on its port: it never listened (the loop above would have seen it otherwise).
  expect(
    await fetch(`${env.url}/healthz`).then(
      () => 'answered',
      () => 'refused',
    ),
  ).toBe('refused');
  return { result, output, dataDir: env.env.DATA_DIR! };
}

function secretFile(value: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'orgdata-half-')), 'secret');
  writeFileSync(file, `${value}\n`, { mode: 0o600 });
  return file;
}

describe('a several-instance setting without DATABASE_URL', { timeout: 60_000 }, () => {
  const cases: { name: string; env: Record<string, string>; named: string }[] = [
    { name: 'REDIS_URL', env: { REDIS_URL: NOWHERE.redis }, named: 'REDIS_URL' },
    { name: 'REDIS_URL_FILE (a Kubernetes Secret)', env: { REDIS_URL_FILE: secretFile(NOWHERE.redis) }, named: 'REDIS_URL' },
    { name: 'BLOB_STORE=s3', env: NOWHERE.s3, named: 'BLOB_STORE=s3' },
    { name: 'both', env: { REDIS_URL: NOWHERE.redis, ...NOWHERE.s3 }, named: 'REDIS_URL, BLOB_STORE=s3' },
  ];

  it.concurrent.each(cases)(
    '$name: `orgdata serve` exits 1 at once naming DATABASE_URL, before it opens the database or listens',
    async ({ env, named }) => {
      // No SECRET_KEY, as on a first start: the secret would be generated into DATA_DIR.
      const { result, output, dataDir } = await serve({ ...env, SECRET_KEY: '' });
      expect(result, output).toBe(1);
      expect(output).toContain(`orgdata: configuration error: DATABASE_URL: is required with ${named}:`);
      expect(output).toContain('Set DATABASE_URL (or DATABASE_URL_FILE) to a postgres:// URL');
      expect(existsSync(path.join(dataDir, 'orgdata.sqlite'))).toBe(false);
      // Nor does it leave a secret behind: a generated secret.key would be taken as this
      // installation's on the next start, once DATABASE_URL is set.
      expect(existsSync(path.join(dataDir, 'secret.key'))).toBe(false);
    },
  );

  it.concurrent('says so in JSON with --json', async () => {
    const { result, output } = await serve({ REDIS_URL: NOWHERE.redis }, ['--json']);
    expect(result, output).toBe(1);
    const { error } = JSON.parse(output) as { error: { code: string; message: string } };
    expect(error.code).toBe('configuration');
    expect(error.message).toMatch(/^configuration error: DATABASE_URL: is required with REDIS_URL:/);
  });

  it('the operator CLI still reads and writes the SQLite data with them set (to export it to PostgreSQL)', async () => {
    const { env } = await serverEnv('sqlite', { REDIS_URL: NOWHERE.redis, ...NOWHERE.s3 });
    expect(await cli(env, ['migrate'])).toMatchObject({ applied: expect.any(Array) as unknown });
    expect(await cli(env, ['org', 'list'])).toEqual([]);
  });

  it('WEBHOOK_WORKER=false alone starts on SQLite (it shares nothing), with a warning that nothing is sent', async () => {
    const warning = 'WEBHOOK_WORKER=false on SQLite: this instance sends no webhook deliveries';
    const { result, output } = await serve({ WEBHOOK_WORKER: 'false' }, [], warning);
    expect(result, output).toBe('listening');
  });
});
