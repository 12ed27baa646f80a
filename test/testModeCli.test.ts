import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEntry } from './helpers/cliEntry.js';

// The operator's side of test mode (SANDBOX.md): `--org` always names the live organisation; its
// sandbox is reached with --test and never listed or addressed as an organisation of its own.

const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));

function cli(env: Record<string, string>, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...CLI, ...args, '--json'], {
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', LOG_LEVEL: 'warn', ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end('');
  });
}

describe('orgdata CLI in test mode', { timeout: 240_000 }, () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-testmode-'));
  const env = { DATA_DIR: dir, SECRET_KEY: 's'.repeat(40) };
  const ok = async <T = Record<string, unknown>>(...args: string[]): Promise<T> => {
    const res = await cli(env, args);
    expect(res.code, res.stdout + res.stderr).toBe(0);
    return JSON.parse(res.stdout) as T;
  };
  let orgId = '';
  const admin = 'admin@example.com';
  beforeAll(async () => {
    await ok('migrate');
    const created = await ok<{ org: { id: string } }>(
      'org',
      'create',
      '--name',
      'Acme',
      '--admin-email',
      admin,
      '--admin-password',
      'correct horse',
    );
    orgId = created.org.id;
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('makes keys of both modes, lists each with its mode, and never lists the sandbox as an organisation', async () => {
    const base = ['--org', orgId, '--admin-email', admin, '--scopes', 'contacts:read'];
    const live = await ok<{ key: string; mode: string }>('keys', 'create', ...base, '--name', 'live');
    const test = await ok<{ key: string; mode: string }>('keys', 'create', ...base, '--name', 'test', '--test');
    expect(live).toMatchObject({ mode: 'live', key: expect.stringMatching(/^od_live_/) });
    expect(test).toMatchObject({ mode: 'test', key: expect.stringMatching(/^od_test_[A-Za-z0-9]{43}$/) });
    const keys = await ok<{ name: string; mode: string }[]>('keys', 'list', '--org', orgId);
    expect(keys.map((k) => [k.name, k.mode])).toEqual([
      ['live', 'live'],
      ['test', 'test'],
    ]);
    const orgs = await ok<{ id: string }[]>('org', 'list');
    expect(orgs.map((o) => o.id)).toEqual([orgId]);
    const text = await cli(env, ['keys', 'list', '--org', orgId]);
    expect(text.stdout).toContain('"mode": "test"');
  });

  it("refuses the sandbox's own id wherever an organisation is named", async () => {
    const { default: SQLite } = await import('better-sqlite3');
    const db = new SQLite(path.join(dir, 'orgdata.sqlite'), { readonly: true });
    const sandbox = (db.prepare('select id from orgs where live_org_id = ?').get(orgId) as { id: string }).id;
    db.close();
    expect(sandbox).toMatch(/^sbx_/);
    for (const args of [
      ['users', 'list', '--org', sandbox],
      ['users', 'add', '--org', sandbox, '--email', 'x@example.com', '--role', 'admin', '--password', 'correct horse'],
      ['keys', 'list', '--org', sandbox],
      ['keys', 'create', '--org', sandbox, '--admin-email', admin, '--name', 'x', '--scopes', 'contacts:read'],
      ['webhooks', 'list', '--org', sandbox],
      ['sandbox', 'reset', '--org', sandbox],
      ['org', 'policy', '--org', sandbox],
    ]) {
      const res = await cli(env, args);
      expect(res.code, `${args.join(' ')}: ${res.stdout}`).not.toBe(0);
      expect(JSON.parse(res.stdout).error.code, args.join(' ')).toBe('not_found');
    }
  });

  it('resets the sandbox with --keys, recorded for the live organisation', async () => {
    const reset = await ok<Record<string, unknown>>('sandbox', 'reset', '--org', orgId, '--keys');
    expect(reset).toMatchObject({ object: 'sandbox_reset', org_id: orgId, api_keys: 1, webhook_endpoints: 0 });
    const keys = await ok<{ mode: string }[]>('keys', 'list', '--org', orgId);
    expect(keys.map((k) => k.mode)).toEqual(['live']);
  });
});
