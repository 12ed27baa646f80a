import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * A real `orgdata serve` process on SQLite for the client's tests, with an organisation and a
 * key made through the operator CLI. No mock: every test talks HTTP to the server.
 */

const ROOT = path.resolve(import.meta.dirname, '../../..');
const run = promisify(execFile);

/**
 * - `source`: `src/cli.ts` through tsx (the code as it is in the tree);
 * - `built`: `dist/cli.js`, what `npm start` runs (built by `npm install`).
 */
export type ServerBuild = 'source' | 'built';

const command = (build: ServerBuild) =>
  build === 'built' ? [path.join(ROOT, 'dist/cli.js')] : ['--import', 'tsx', path.join(ROOT, 'src/cli.ts')];

export interface OrgdataServer {
  /** `http://127.0.0.1:PORT/api/v1` */
  baseUrl: string;
  /** `http://127.0.0.1:PORT` */
  origin: string;
  /** A key with every write scope (so every read scope too). */
  apiKey: string;
  orgId: string;
  adminEmail: string;
  env: Record<string, string>;
  /** Runs an operator CLI command with `--json`. */
  cli<T = Record<string, unknown>>(args: string[]): Promise<T>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

export async function startServer(extraEnv: Record<string, string> = {}, build: ServerBuild = 'source'): Promise<OrgdataServer> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-client-'));
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    DATA_DIR: dataDir,
    SECRET_KEY: randomBytes(32).toString('hex'),
    PORT: String(port),
    HOST: '127.0.0.1',
    PUBLIC_URL: origin,
    LOG_LEVEL: 'warn',
    RATE_LIMIT_BURST: '1000000',
    RATE_LIMIT_PER_SECOND: '1000000',
    DAILY_QUOTA: '100000000',
    ...extraEnv,
  };
  const child = spawn(process.execPath, [...command(build), 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await waitUntilUp(child, origin, () => output);

  const cli = async <T = Record<string, unknown>>(args: string[]): Promise<T> => {
    const { stdout } = await run(process.execPath, [...command(build), ...args, '--json'], { cwd: ROOT, env });
    return JSON.parse(stdout) as T;
  };
  const adminEmail = `admin-${randomBytes(4).toString('hex')}@example.com`;
  const created = await cli<{ org: { id: string } }>([
    'org',
    'create',
    '--name',
    'Client test org',
    '--admin-email',
    adminEmail,
    '--admin-password',
    'correct horse battery staple',
  ]);
  const key = await cli<{ key: string }>([
    'keys',
    'create',
    '--org',
    created.org.id,
    '--admin-email',
    adminEmail,
    '--name',
    'client tests',
    '--scopes',
    'contacts:write,groups:write,files:write',
  ]);
  return {
    baseUrl: `${origin}/api/v1`,
    origin,
    apiKey: key.key,
    orgId: created.org.id,
    adminEmail,
    env,
    cli,
    async stop() {
      child.kill('SIGTERM');
      const killer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(killer);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function waitUntilUp(child: ChildProcess, origin: string, output: () => string): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (child.exitCode !== null) throw new Error(`the server exited during start:\n${output()}`);
    try {
      if ((await fetch(`${origin}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`the server did not start within 30 s:\n${output()}`);
}
