import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { verifyPassword } from '../src/domain/orgs/passwords.js';
import { serverEnv } from './helpers/serverProcess.js';
import { cliEntry } from './helpers/cliEntry.js';

const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));
const SECRET_A = 'a'.repeat(40);
const SECRET_B = 'b'.repeat(40);

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as a process, with the given environment (nothing inherited but PATH and HOME) and standard input. */
function cli(env: Record<string, string>, args: string[], stdin = ''): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...CLI, ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'warn', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}

const json = async (env: Record<string, string>, args: string[], stdin = '') => {
  const res = await cli(env, [...args, '--json'], stdin);
  expect(res.code, res.stdout + res.stderr).toBe(0);
  return JSON.parse(res.stdout);
};

describe('orgdata CLI for an operator', { timeout: 240_000 }, () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-op-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  it('prints its version', async () => {
    const { version } = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
    expect((await cli({}, ['--version'])).stdout.trim()).toBe(`orgdata ${version}`);
    expect(await json({}, ['--version'])).toEqual({ version });
  });

  it('never creates a database or a secret outside serve and migrate, and says where it looked', async () => {
    const empty = tempDir();
    const noSecret = await cli({ DATA_DIR: empty }, ['org', 'list']);
    expect(noSecret.code).toBe(1);
    expect(noSecret.stderr).toContain(path.join(empty, 'secret.key'));
    expect(noSecret.stderr).toContain('DATA_DIR');
    const withSecret = await cli({ DATA_DIR: empty, SECRET_KEY: SECRET_A }, ['users', 'list', '--org', 'org_x', '--json']);
    expect(withSecret.code).toBe(1);
    const error = JSON.parse(withSecret.stdout).error as { code: string; message: string };
    expect(error.code).toBe('configuration');
    expect(error.message).toContain(`there is no database at ${path.join(empty, 'orgdata.sqlite')}`);
    expect(readdirSync(empty)).toEqual([]);
    // A directory that does not exist stays that way.
    const missing = path.join(empty, 'nope');
    expect((await cli({ DATA_DIR: missing, SECRET_KEY: SECRET_A }, ['org', 'list'])).code).toBe(1);
    expect(existsSync(missing)).toBe(false);
  });

  it.skipIf(!process.env.TEST_DATABASE_URL)('refuses a PostgreSQL database the server never used', async () => {
    const pg = await serverEnv('postgres');
    try {
      const res = await cli({ ...pg.env, SECRET_KEY: SECRET_A }, ['org', 'list', '--json']);
      expect(res.code).toBe(1);
      expect(JSON.parse(res.stdout).error.message).toContain('that database has no orgdata tables');
    } finally {
      await pg.dispose();
    }
  });

  it('refuses another SECRET_KEY than the data was made with, server included, until it is accepted on purpose', async () => {
    const dir = tempDir();
    const a = { DATA_DIR: dir, SECRET_KEY: SECRET_A };
    const b = { DATA_DIR: dir, SECRET_KEY: SECRET_B };
    await json(a, ['migrate']);
    await json(a, ['org', 'create', '--name', 'Keyed', '--admin-email', 'ada@example.com', '--admin-password', 'correct horse battery']);

    const refused = await cli(b, ['org', 'list', '--json']);
    expect(refused.code).toBe(1);
    const error = JSON.parse(refused.stdout).error as { code: string; message: string };
    expect(error.code).toBe('configuration');
    expect(error.message).toContain('SECRET_KEY: this is not the secret the data was made with');
    expect(error.message).toContain('orgdata migrate --accept-new-secret');
    expect(error.message).not.toContain(SECRET_A);
    expect(error.message).not.toContain(SECRET_B);

    // The server refuses to start, saying why, instead of answering every key "malformed".
    const serve = await cli({ ...b, PORT: '0' }, ['serve']);
    expect(serve.code).toBe(1);
    expect(serve.stderr).toContain('not the secret the data was made with');

    await json(b, ['migrate', '--accept-new-secret']);
    expect(await json(b, ['org', 'list'])).toHaveLength(1);
    expect((await cli(a, ['org', 'list'])).code).toBe(1);
  });

  it('org create and users add read the password from standard input or a terminal prompt, not only an argument', async () => {
    const env = { DATA_DIR: tempDir(), SECRET_KEY: SECRET_A };
    await json(env, ['migrate']);
    const create = ['org', 'create', '--name', 'Piped', '--admin-email', 'ada@example.com'];
    // Standard input's first line is the password; nothing else of it is read as one.
    const made = await json(env, create, 'correct horse battery\nnot this\n');
    const add = ['users', 'add', '--org', made.org.id, '--email', 'bob@example.com', '--role', 'member'];
    const bob = await json(env, add, 'a good long password\n');
    // A too-short password gets the error an argument gets, and makes nothing.
    const short = await cli(env, ['org', 'create', '--name', 'Short', '--admin-email', 'eve@example.com', '--json'], 'short\n');
    expect(short.code).toBe(1);
    expect(JSON.parse(short.stdout).error).toMatchObject({ code: 'invalid_request' });
    const shortArg = await cli(env, [
      ...create.slice(0, 3),
      'Short',
      '--admin-email',
      'eve@example.com',
      '--admin-password',
      'short',
      '--json',
    ]);
    expect(JSON.parse(shortArg.stdout).error).toEqual(JSON.parse(short.stdout).error);
    expect(await json(env, ['org', 'list'])).toHaveLength(1);

    // On a terminal: asked twice on stderr, not echoed, so `$(...)` captures only the answer.
    const typed = await new Promise<Run>((resolve) => {
      const args = [...CLI, 'users', 'add', '--org', made.org.id, '--email', 'cy@example.com', '--role', 'admin', '--json'];
      const command = [process.execPath, ...args].map((a) => `'${a}'`).join(' ');
      // script(1) gives the CLI a pseudo-terminal; the password is typed into it, twice.
      const child = spawn('script', ['-qec', command, '/dev/null'], {
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'warn', ...env },
      });
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => {
        stdout += d.toString();
        if (stdout.endsWith('Password for cy@example.com: ')) child.stdin.write('typed on a terminal\r');
        if (stdout.endsWith('Again: ')) child.stdin.write('typed on a terminal\r');
      });
      child.on('close', (code) => resolve({ code, stdout, stderr: '' }));
    });
    expect(typed.code, typed.stdout).toBe(0);
    expect(typed.stdout).not.toContain('typed on a terminal');
    expect(typed.stdout).toMatch(/"email": "cy@example.com"/);

    const db = new SQLite(path.join(env.DATA_DIR, 'orgdata.sqlite'));
    try {
      const hashOf = (id: string) =>
        (db.prepare('select password_hash from users where id = ?').get(id) as { password_hash: string }).password_hash;
      const cy = db.prepare("select id from users where email = 'cy@example.com'").get() as { id: string };
      expect(await verifyPassword(hashOf(made.user.id), 'correct horse battery')).toBe(true);
      expect(await verifyPassword(hashOf(bob.id), 'a good long password')).toBe(true);
      expect(await verifyPassword(hashOf(cy.id), 'typed on a terminal')).toBe(true);
    } finally {
      db.close();
    }
  });

  it('lists organisations and members, and resets a password read from standard input', async () => {
    const env = { DATA_DIR: tempDir(), SECRET_KEY: SECRET_A };
    await json(env, ['migrate']);
    expect((await cli(env, ['org', 'list'])).stdout).toContain('no organisations yet');
    const made = await json(env, [
      'org',
      'create',
      '--name',
      'Listed',
      '--admin-email',
      'ada@example.com',
      '--admin-password',
      'correct horse battery',
    ]);
    await json(env, [
      'users',
      'add',
      '--org',
      made.org.id,
      '--email',
      'bob@example.com',
      '--password',
      'a good long password',
      '--role',
      'member',
    ]);

    const orgs = await json(env, ['org', 'list']);
    expect(orgs).toEqual([{ id: made.org.id, name: 'Listed', created_at: expect.any(String), members: 2, admins: 1 }]);
    expect((await cli(env, ['org', 'list'])).stdout).toContain(`${made.org.id}  Listed`);
    const members = await json(env, ['users', 'list', '--org', made.org.id]);
    expect(members.map((m: { email: string; role: string }) => [m.email, m.role])).toEqual([
      ['ada@example.com', 'admin'],
      ['bob@example.com', 'member'],
    ]);

    const db = new SQLite(path.join(env.DATA_DIR, 'orgdata.sqlite'));
    try {
      const bob = db.prepare("select id from users where email = 'bob@example.com'").get() as { id: string };
      db.prepare(
        "insert into sessions (id_hash, user_id, org_id, csrf_token, created_at, expires_at) values ('hash', ?, ?, 'csrf', '2026-01-01T00:00:00.000Z', '2999-01-01T00:00:00.000Z')",
      ).run(bob.id, made.org.id);
      const reset = await json(
        env,
        ['users', 'set-password', '--org', made.org.id, '--email', 'bob@example.com'],
        'a brand new password\n',
      );
      expect(reset).toEqual({ id: bob.id, email: 'bob@example.com', ended_sessions: 1 });
      const { password_hash } = db.prepare('select password_hash from users where id = ?').get(bob.id) as { password_hash: string };
      expect(await verifyPassword(password_hash, 'a brand new password')).toBe(true);
      expect(await verifyPassword(password_hash, 'a good long password')).toBe(false);
      expect(db.prepare('select count(*) as n from sessions where user_id = ?').get(bob.id)).toEqual({ n: 0 });
    } finally {
      db.close();
    }
    const short = await cli(env, ['users', 'set-password', '--org', made.org.id, '--email', 'bob@example.com', '--json'], 'short\n');
    expect(short.code).toBe(1);
    expect(JSON.parse(short.stdout).error.code).toBe('invalid_request');
    const stranger = await cli(
      env,
      ['users', 'set-password', '--org', made.org.id, '--email', 'eve@example.com', '--json'],
      'a brand new password\n',
    );
    expect(JSON.parse(stranger.stdout).error.code).toBe('not_found');
  });
});
