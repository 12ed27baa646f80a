import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEntry } from './helpers/cliEntry.js';

const run = promisify(execFile);
const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));

/** `orgdata webhooks …` as an operator runs it, against an embedded database in a temp DATA_DIR. */
describe('orgdata webhooks CLI', { timeout: 180_000 }, () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-cli-'));
  const base = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', SECRET_KEY: '' };
  let orgId: string;

  async function cli(args: string[], env: Record<string, string> = {}): Promise<{ stdout: string; stderr: string; code: number }> {
    try {
      const { stdout, stderr } = await run(process.execPath, [...CLI, ...args], { env: { ...base, ...env } });
      return { stdout, stderr, code: 0 };
    } catch (error) {
      const e = error as { stdout: string; stderr: string; code: number };
      return { stdout: e.stdout, stderr: e.stderr, code: e.code };
    }
  }
  const json = async (args: string[], env: Record<string, string> = {}) => {
    const res = await cli([...args, '--json'], env);
    expect(res.code, res.stderr + res.stdout).toBe(0);
    return JSON.parse(res.stdout);
  };

  beforeAll(async () => {
    await json(['migrate']);
    const made = await json([
      'org',
      'create',
      '--name',
      'Hooks',
      '--admin-email',
      'ada@example.com',
      '--admin-password',
      'correct horse battery',
    ]);
    orgId = made.org.id;
  }, 180_000);
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('creates an endpoint, printing its secret once, then lists, disables, enables and deletes it', async () => {
    const created = await json([
      'webhooks',
      'create',
      '--org',
      orgId,
      '--url',
      'https://93.184.216.34/hooks',
      '--events',
      'contact.*,group.member_added',
    ]);
    expect(Object.keys(created).sort()).toEqual(['events', 'id', 'secret', 'url']);
    expect(created).toMatchObject({ url: 'https://93.184.216.34/hooks', events: ['contact.*', 'group.member_added'] });
    expect(created.id).toMatch(/^we_/);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);

    const list = await json(['webhooks', 'list', '--org', orgId]);
    expect(list).toHaveLength(1);
    expect(list[0]).toMatchObject({ id: created.id, status: 'enabled', created_by: 'operator' });
    expect(JSON.stringify(list)).not.toContain(created.secret);

    const disabled = await json(['webhooks', 'disable', '--org', orgId, created.id]);
    expect(disabled).toMatchObject({ status: 'disabled', disabled_reason: expect.stringContaining('Disabled by the operator') });
    const text = await cli(['webhooks', 'list', '--org', orgId]);
    expect(text.stdout).toContain(`${created.id}  disabled`);
    expect((await json(['webhooks', 'enable', '--org', orgId, created.id])).status).toBe('enabled');
    expect((await json(['webhooks', 'delete', '--org', orgId, created.id])).id).toBe(created.id);
    expect(await json(['webhooks', 'list', '--org', orgId])).toEqual([]);
  });

  it('subscribes to every event by default, and takes a local URL only with WEBHOOK_ALLOW_PRIVATE_URLS=true', async () => {
    const refused = await cli(['webhooks', 'create', '--org', orgId, '--url', 'http://127.0.0.1:9999/hook', '--json']);
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stdout).error).toMatchObject({
      code: 'invalid_request',
      message: expect.stringContaining('url: must use https'),
    });
    const plain = await cli(['webhooks', 'create', '--org', orgId, '--url', 'https://10.0.0.1/hook']);
    expect(plain.code).toBe(1);
    expect(plain.stderr).toContain('url: must not point to a private address: 10.0.0.1');

    const local = await json(['webhooks', 'create', '--org', orgId, '--url', 'http://127.0.0.1:9999/hook'], {
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
    });
    expect(local.events).toEqual(['*']);
  });

  it('refuses unknown event types, unknown organisations and a missing endpoint id', async () => {
    const bad = await cli(['webhooks', 'create', '--org', orgId, '--url', 'https://93.184.216.34/h', '--events', 'contact.exploded']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('events: unknown event type or pattern contact.exploded');
    const noOrg = await cli(['webhooks', 'list', '--org', 'org_nope', '--json']);
    expect(noOrg.code).toBe(1);
    expect(JSON.parse(noOrg.stdout).error.code).toBe('not_found');
    const noId = await cli(['webhooks', 'delete', '--org', orgId]);
    expect(noId.code).toBe(2);
    expect(noId.stderr).toContain('missing ENDPOINT_ID');
    expect(noId.stderr).toContain('orgdata webhooks create --org ORG_ID --url URL');
  });
});
