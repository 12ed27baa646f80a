import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { randomBase62 } from '../../src/domain/ids.js';
import { SECRET } from './harness.js';
import { cliEntry } from './cliEntry.js';

/**
 * The checkout whose server and CLI run: this one, or BENCH_CHECKOUT's (`bench/budget.ts`
 * measuring an earlier build side by side, built in a worktree of its own).
 */
const ROOT = process.env.BENCH_CHECKOUT ? path.resolve(process.env.BENCH_CHECKOUT) : path.resolve(import.meta.dirname, '../..');
/** `orgdata` as the tests start it: dist/cli.js when built from the sources as they are, else src/cli.ts through tsx. */
const CLI = cliEntry(ROOT);
/** The built server, what `npm start` runs (`npm run build` makes it). */
const BUILT_CLI = path.join(ROOT, 'dist/cli.js');
/** The Node flags of `npm start` (package.json), so that the benchmarks measure the same process. */
export const START_FLAGS = (
  JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }
).scripts.start
  .split(' ')
  .filter((word) => word.startsWith('--'));
const run = promisify(execFile);

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Environment for a real server process: its own DATA_DIR, port, and (on PostgreSQL) database. */
export interface ServerEnv {
  env: Record<string, string>;
  url: string;
  /** Drops the PostgreSQL database made for it (after every process using it has stopped). */
  dispose(): Promise<void>;
}

export async function serverEnv(dialect: 'sqlite' | 'postgres', extra: Record<string, string> = {}): Promise<ServerEnv> {
  const port = await freePort();
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    DATA_DIR: mkdtempSync(path.join(tmpdir(), 'orgdata-proc-')),
    SECRET_KEY: SECRET,
    PORT: String(port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'warn',
    RATE_LIMIT_BURST: '1000000',
    RATE_LIMIT_PER_SECOND: '1000000',
    DAILY_QUOTA: '100000000',
    ...extra,
  };
  let dispose = async () => {};
  if (dialect === 'postgres') {
    const base = process.env.TEST_DATABASE_URL!;
    const name = `orgdata_${randomBase62(10).toLowerCase()}`;
    const admin = new pg.Client({ connectionString: base });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    await admin.end();
    const url = new URL(base);
    url.pathname = `/${name}`;
    env.DATABASE_URL = url.toString();
    dispose = async () => {
      const client = new pg.Client({ connectionString: base });
      await client.connect();
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await client.end();
    };
  }
  return { env, url: `http://127.0.0.1:${port}`, dispose };
}

/** Runs an operator CLI command with `--json` and returns its parsed output. */
export async function cli<T = Record<string, unknown>>(env: Record<string, string>, args: string[]): Promise<T> {
  const { stdout } = await run(process.execPath, [...CLI, ...args, '--json'], { env });
  return JSON.parse(stdout) as T;
}

/**
 * An organisation and an API key with every scope, made through the operator CLI (after
 * `orgdata migrate`, which creates the database: other commands never do).
 */
export async function orgWithKey(
  env: Record<string, string>,
): Promise<{ orgId: string; key: string; keyId: string; email: string; password: string }> {
  await cli(env, ['migrate']);
  const email = `admin-${randomBase62(8).toLowerCase()}@example.com`;
  const created = await cli<{ org: { id: string } }>(env, [
    'org',
    'create',
    '--name',
    'Process org',
    '--admin-email',
    email,
    '--admin-password',
    'correct horse battery',
  ]);
  const key = await cli<{ key: string; id: string }>(env, [
    'keys',
    'create',
    '--org',
    created.org.id,
    '--admin-email',
    email,
    '--name',
    'process key',
    '--scopes',
    'contacts:write,groups:write,files:write',
  ]);
  return { orgId: created.org.id, key: key.key, keyId: key.id, email, password: 'correct horse battery' };
}

export interface ServerProcess {
  child: ChildProcess;
  /** Resolves with the exit code (null when killed by a signal) once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** What the process wrote to stderr and stdout, for failure messages. */
  output(): string;
}

/**
 * Starts `orgdata serve` as a child process and waits until /healthz answers. Tests run what
 * cliEntry chooses (dist/cli.js when it is built from the sources as they are, else the sources
 * through tsx); the benchmarks pass `built` to measure exactly what `npm start` runs (its Node
 * flags too), after `npm run build`.
 */
export async function startServerProcess(
  env: ServerEnv,
  options: {
    built?: boolean;
    /** A command the server runs under (bench/instructions.ts: valgrind and its options). */
    wrapper?: string[];
    /** Node (V8) flags added to `npm start`'s (built only). */
    nodeFlags?: string[];
    /** How long to wait for /healthz (default 30 s). */
    startSeconds?: number;
  } = {},
): Promise<ServerProcess> {
  const args = options.built ? [...START_FLAGS, ...(options.nodeFlags ?? []), BUILT_CLI, 'serve'] : [...CLI, 'serve'];
  const [command, ...wrapperArgs] = [...(options.wrapper ?? []), process.execPath];
  const child = spawn(command!, [...wrapperArgs, ...args], { env: env.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  let done = false;
  void exited.then(() => (done = true));
  const startSeconds = options.startSeconds ?? 30;
  for (let attempt = 0; attempt < startSeconds * 10; attempt++) {
    if (done) throw new Error(`the server exited during start:\n${output}`);
    try {
      const res = await fetch(`${env.url}/healthz`);
      if (res.ok) return { child, exited, output: () => output };
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`the server did not start within ${startSeconds} s:\n${output}`);
}
