import { execFile } from 'node:child_process';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { suiteServer } from './helpers/suiteServer.js';
import { cliEntry } from './helpers/cliEntry.js';

const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));

interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * The operator CLI beside a running server on one SQLite file: concurrent runs wait for SQLite's
 * write lock (BEGIN IMMEDIATE) instead of failing with `database is locked`, and a failure has a
 * real code and exit status.
 */
describe('sqlite: the CLI beside a running server', { timeout: 240_000 }, () => {
  const suite = suiteServer('sqlite', {}, { org: true, stopWith: 'SIGKILL' });

  const cli = (...args: string[]) =>
    new Promise<CliRun>((resolve) => {
      execFile(process.execPath, [...CLI, ...args, '--json'], { env: suite.env.env }, (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      });
    });

  it('runs 16 concurrent `users add` while the API writes, and every one succeeds', async () => {
    let writing = true;
    let written = 0;
    const statuses: number[] = [];
    const api = (async () => {
      while (writing) {
        const res = await fetch(`${suite.url}/api/v1/contacts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ first_name: 'Beside', email: `beside${written}@example.com` }),
          signal: AbortSignal.timeout(30_000),
        });
        statuses.push(res.status);
        written++;
      }
    })();
    const runs = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        cli(
          'users',
          'add',
          '--org',
          suite.org.orgId,
          '--email',
          `member${i}@example.com`,
          '--password',
          'a good long password',
          '--role',
          'member',
        ),
      ),
    );
    writing = false;
    await api;
    for (const run of runs) expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(written).toBeGreaterThan(0);
    expect(new Set(statuses)).toEqual(new Set([201]));

    const db = new SQLite(path.join(suite.env.env.DATA_DIR!, 'orgdata.sqlite'), { readonly: true });
    try {
      const row = db.prepare("select count(*) as n from memberships where org_id = ? and role = 'member'").get(suite.org.orgId);
      expect(row).toEqual({ n: 16 });
    } finally {
      db.close();
    }
  });

  it('says database_busy (exit 75) when the lock stays taken past the wait, and changes nothing', async () => {
    const other = new SQLite(path.join(suite.env.env.DATA_DIR!, 'orgdata.sqlite'));
    try {
      other.exec('begin immediate');
      const run = await cli(
        'users',
        'add',
        '--org',
        suite.org.orgId,
        '--email',
        'late@example.com',
        '--password',
        'a good long password',
        '--role',
        'member',
      );
      expect(run.code, run.stdout + run.stderr).toBe(75);
      const body = JSON.parse(run.stdout) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('database_busy');
      expect(body.error.message).toMatch(/nothing was changed/);
      other.exec('rollback');
      expect(other.prepare("select count(*) as n from users where email = 'late@example.com'").get()).toEqual({ n: 0 });
    } finally {
      if (other.inTransaction) other.exec('rollback');
      other.close();
    }
  });

  it('gives other failures their own codes', async () => {
    const unknownOrg = await cli(
      'users',
      'add',
      '--org',
      'org_nope',
      '--email',
      'x@example.com',
      '--password',
      'a good long password',
      '--role',
      'member',
    );
    expect(unknownOrg.code).toBe(1);
    expect(JSON.parse(unknownOrg.stdout).error.code).toBe('not_found');
    const badRole = await cli(
      'users',
      'add',
      '--org',
      suite.org.orgId,
      '--email',
      'x@example.com',
      '--password',
      'a good long password',
      '--role',
      'owner',
    );
    expect(badRole.code).toBe(1);
    expect(JSON.parse(badRole.stdout).error.code).toBe('invalid_request');
    const usage = await cli('users', 'frobnicate');
    expect(usage.code).toBe(2);
    expect(JSON.parse(usage.stdout).error.code).toBe('usage');
  });
});
