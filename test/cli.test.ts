import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config/load.js';
import { openDatabase, type Db } from '../src/db/database.js';
import { buildApp } from '../src/app.js';
import { MemoryRateLimiter } from '../src/infra/rateLimit/memoryRateLimiter.js';
import { checkContract } from './helpers/contract.js';
import { cliEntry } from './helpers/cliEntry.js';

const run = promisify(execFile);
const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));

/** The operator CLI as a user runs it, against an embedded database in a temp DATA_DIR. */
// Each command is a fresh Node process compiling TypeScript on the fly: allow it time on a busy machine.
describe('orgdata CLI', { timeout: 180_000 }, () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-cli-'));
  const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', SECRET_KEY: '' };
  let db: Db;

  async function cli(...args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
    try {
      const { stdout, stderr } = await run(process.execPath, [...CLI, ...args], { env });
      return { stdout, stderr, code: 0 };
    } catch (error) {
      const e = error as { stdout: string; stderr: string; code: number };
      return { stdout: e.stdout, stderr: e.stderr, code: e.code };
    }
  }
  const json = async (...args: string[]) => {
    const res = await cli(...args, '--json');
    expect(res.code, res.stderr + res.stdout).toBe(0);
    return JSON.parse(res.stdout);
  };

  beforeAll(async () => {
    const migrated = await json('migrate');
    expect(migrated.applied).toEqual([
      '001_core',
      '002_groups_files',
      '003_sessions',
      '004_events_webhooks',
      '005_list_indexes',
      '006_contact_label_order',
      '007_event_resource_order',
      '008_drop_events_age',
      '009_blob_purges',
      '010_settings',
      '011_source_types',
      '012_contact_sync',
      '013_contact_search',
      '014_search_prefixes',
      '015_contact_email_domains',
      '016_event_actors',
      '017_request_log',
      '018_event_system_actor',
      '019_contact_email_nfc',
      '020_invitations_password_resets',
      '021_sign_in_factors',
      '022_sso_trust',
      '023_sso_domain_verification',
      '025_bounded_sign_in',
      '026_sso_links_consent',
      '027_sandbox',
      '028_session_test_mode',
    ]);
    db = openDatabase({ databaseUrl: null, dataDir });
  }, 180_000);
  afterAll(async () => {
    await db.close();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('makes an org, users and keys that the API accepts, and revokes them', async () => {
    const made = await json(
      'org',
      'create',
      '--name',
      'Acme',
      '--admin-email',
      'ada@example.com',
      '--admin-password',
      'correct horse battery',
    );
    expect(made.org.id).toMatch(/^org_/);
    expect(made.user).toMatchObject({ email: 'ada@example.com' });
    const orgId: string = made.org.id;
    const bob = await json(
      'users',
      'add',
      '--org',
      orgId,
      '--email',
      'bob@example.com',
      '--password',
      'another good one',
      '--role',
      'admin',
    );
    expect(bob).toMatchObject({ email: 'bob@example.com', role: 'admin' });

    const key = await json(
      'keys',
      'create',
      '--org',
      orgId,
      '--admin-email',
      'bob@example.com',
      '--name',
      'CI',
      '--scopes',
      'contacts:write,groups:read',
    );
    expect(Object.keys(key).sort()).toEqual(['expires_at', 'id', 'key', 'last4', 'mode', 'name', 'scopes']);
    expect(key.key).toMatch(/^od_live_[A-Za-z0-9]{43}$/);
    expect(key.last4).toBe(key.key.slice(-4));
    const forever = await json(
      'keys',
      'create',
      '--org',
      orgId,
      '--admin-email',
      'ada@example.com',
      '--name',
      'Forever',
      '--scopes',
      'contacts:read',
      '--never',
    );
    expect(forever.expires_at).toBeNull();

    // The key works against a server on the same DATA_DIR (the generated secret is shared).
    const config = loadConfig({ DATA_DIR: dataDir });
    const app = checkContract(
      await buildApp({
        config,
        db,
        rateLimiter: new MemoryRateLimiter({ burst: 100, perSecond: 100, dailyQuota: 1000 }),
        logger: false,
      }),
    );
    const get = (k: string) => app.inject({ method: 'GET', url: '/api/v1/contacts', headers: { authorization: `Bearer ${k}` } });
    try {
      expect((await get(key.key)).statusCode).toBe(200);
      expect((await get(forever.key)).statusCode).toBe(200);

      const list = await json('keys', 'list', '--org', orgId);
      expect(list.map((k: { id: string }) => k.id)).toEqual([key.id, forever.id]);
      expect(JSON.stringify(list)).not.toContain(key.key);

      // Demoting bob revokes the key he created, at once.
      const demoted = await json('users', 'set-role', '--org', orgId, '--email', 'bob@example.com', '--role', 'member');
      expect(demoted.revoked_keys).toBe(1);
      expect((await get(key.key)).statusCode).toBe(401);

      const revoked = await json('keys', 'revoke', '--org', orgId, forever.id);
      expect(revoked.revoked_at).not.toBeNull();
      expect((await get(forever.key)).statusCode).toBe(401);
    } finally {
      await app.close();
    }
  });

  it('prints the key once in text mode, and explains bad input', async () => {
    const made = await json(
      'org',
      'create',
      '--name',
      'Text',
      '--admin-email',
      'text@example.com',
      '--admin-password',
      'correct horse battery',
    );
    const text = await cli(
      'keys',
      'create',
      '--org',
      made.org.id,
      '--admin-email',
      'text@example.com',
      '--name',
      'T',
      '--scopes',
      'files:read',
    );
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(/^od_live_[A-Za-z0-9]{43}\n/);
    expect(text.stdout).toContain('only time');

    const badScope = await cli(
      'keys',
      'create',
      '--org',
      made.org.id,
      '--admin-email',
      'text@example.com',
      '--name',
      'T',
      '--scopes',
      'contacts:admin',
    );
    expect(badScope.code).toBe(1);
    expect(badScope.stderr).toContain('unknown scope contacts:admin');
    const member = await cli(
      'keys',
      'create',
      '--org',
      made.org.id,
      '--admin-email',
      'nobody@example.com',
      '--name',
      'T',
      '--scopes',
      'files:read',
    );
    expect(member.code).toBe(1);
    expect(member.stderr).toContain('not a member');
    const badEmail = await cli(
      'org',
      'create',
      '--name',
      'X',
      '--admin-email',
      'not-an-email',
      '--admin-password',
      'correct horse battery',
      '--json',
    );
    expect(badEmail.code).toBe(1);
    expect(JSON.parse(badEmail.stdout).error.code).toBe('invalid_request');
    const usage = await cli('keys', 'explode');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('unknown command');
    const missing = await cli('users', 'add', '--org', made.org.id);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('missing --email');
  });

  it('stops on a bad configuration value and names the variable', async () => {
    const res = await run(process.execPath, [...CLI, 'migrate'], { env: { ...env, PORT: 'eighty' } }).catch(
      (e: { stderr: string; code: number }) => e,
    );
    expect((res as { code: number }).code).toBe(1);
    expect((res as { stderr: string }).stderr).toContain('PORT');
  });
});
