import { migrations } from '../src/db/database.js';
import { randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExportManifest } from '../src/cli/exchange/format.js';
import { cliResult, errorCode, everyFile, exportedRows, listAll, sha256 } from './helpers/exchange.js';
import { S3rverProcess } from './helpers/s3rverProcess.js';
import { freePort, orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';
import { startReceiver, type Receiver } from './helpers/webhookReceiver.js';
import { fetchSignIn } from './helpers/signInForm.js';

// Issue 19, items 2 and 3: `orgdata export` / `orgdata import` (the move SQLite + local files →
// PostgreSQL + S3, and back) and `orgdata org export`, with real server processes.
describe.skipIf(!process.env.TEST_DATABASE_URL)('export and import between installations', { timeout: 600_000 }, () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-exchange-'));
    dirs.push(dir);
    return dir;
  };
  const envs: ServerEnv[] = [];
  let receiver: Receiver;
  let s3: S3rverProcess;

  // What the source installation held, and what was seen of it before the move.
  let source: ServerEnv;
  let org: { orgId: string; key: string; email: string; password: string };
  let otherOrg: string;
  let webhookSecret: string;
  let contactsBefore: Record<string, unknown>[];
  let cursor: string;
  let secondPage: unknown;
  let fileId: string;
  const bytes = randomBytes(150_000);
  let idempotent: { body: string; id: string };
  let sessionCookie: string;
  let exported: string;
  // Test mode (SANDBOX.md): the organisation's sandbox, with its own key, contact and file.
  let testKey: string;
  let sandbox: { contactId: string; fileId: string };
  const testBytes = randomBytes(20_000);

  beforeAll(async () => {
    receiver = await startReceiver();
    s3 = await S3rverProcess.start();
    source = await serverEnv('sqlite', { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    envs.push(source);
    org = await orgWithKey(source.env);
    const other = await cliResult(source.env, [
      'org',
      'create',
      '--name',
      'Other',
      '--admin-email',
      'o@example.com',
      '--admin-password',
      'another long one',
    ]);
    otherOrg = (other.json.org as { id: string }).id;
    const hook = await cliResult(source.env, ['webhooks', 'create', '--org', org.orgId, '--url', receiver.url, '--events', 'contact.*']);
    expect(hook.code, JSON.stringify(hook.json)).toBe(0);
    webhookSecret = String(hook.json.secret);
    receiver.secrets = [webhookSecret];

    const server = await startServerProcess(source);
    const api = `${source.url}/api/v1`;
    const headers = { authorization: `Bearer ${org.key}`, 'content-type': 'application/json' };
    const post = async (url: string, body: unknown, extra: Record<string, string> = {}) => {
      const res = await fetch(`${api}${url}`, { method: 'POST', headers: { ...headers, ...extra }, body: JSON.stringify(body) });
      expect(res.status, await res.clone().text()).toBeLessThan(300);
      return (await res.json()) as Record<string, unknown> & { id: string };
    };
    const label = await post('/contacts/labels', { name: 'Moved' });
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) {
      const contact = await post('/contacts', {
        first_name: i === 7 ? 'Zoë' : `Person${i}`,
        last_name: 'Traveller',
        email: `p${i}@example.com`,
        external_id: `crm-${i}`,
        metadata: { tier: i % 2 ? 'gold' : 'silver' },
        label_ids: [label.id],
      });
      ids.push(contact.id);
    }
    const group = await post('/groups', { name: 'Movers', metadata: { region: 'north' } });
    await post(`/groups/${group.id}/members`, { contact_ids: ids.slice(0, 5) });
    idempotent = { body: JSON.stringify({ first_name: 'Once', email: 'once@example.com' }), id: '' };
    idempotent.id = (await post('/contacts', JSON.parse(idempotent.body), { 'idempotency-key': 'move-once-1' })).id;
    const file = await post('/files', { name: 'data.bin', content_type: 'application/octet-stream', size: bytes.length });
    expect((await fetch(String(file.upload_url), { method: 'PUT', body: bytes })).status).toBe(200);
    fileId = file.id;
    // A pending file (reserved, never uploaded): a row without bytes.
    await post('/files', { name: 'later.txt', content_type: 'text/plain', size: 3 });
    // The sandbox: a test key, a contact and a file of its own (bytes under the blob store's test/ prefix).
    const made = await cliResult(source.env, [
      ...['keys', 'create', '--org', org.orgId, '--admin-email', org.email, '--name', 'sandbox key'],
      ...['--scopes', 'contacts:write,files:write', '--test'],
    ]);
    expect(made.code, JSON.stringify(made.json)).toBe(0);
    testKey = String(made.json.key);
    const testPost = async (url: string, body: unknown) => {
      const res = await fetch(`${api}${url}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${testKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(res.status, await res.clone().text()).toBeLessThan(300);
      return (await res.json()) as Record<string, unknown> & { id: string };
    };
    const sandboxContact = await testPost('/contacts', { first_name: 'Sandy', email: 'sandy@example.com' });
    const testFile = await testPost('/files', { name: 'test.bin', content_type: 'application/octet-stream', size: testBytes.length });
    expect((await fetch(String(testFile.upload_url), { method: 'PUT', body: testBytes })).status).toBe(200);
    sandbox = { contactId: sandboxContact.id, fileId: testFile.id };
    // A dashboard session.
    const login = await fetchSignIn(source.url, { email: org.email, password: org.password });
    expect(login.status).toBe(303);
    sessionCookie = login.headers.getSetCookie()[0]!.split(';')[0]!;
    // A cursor taken before the move, and the page it leads to.
    const first = (await (await fetch(`${api}/contacts?limit=10`, { headers })).json()) as { next_cursor: string };
    cursor = first.next_cursor;
    secondPage = await (await fetch(`${api}/contacts?limit=10&cursor=${cursor}`, { headers })).json();
    contactsBefore = await listAll(source.url, org.key);
    await receiver.until(() => receiver.received.length >= 26, 30_000, 'the webhook deliveries before the move');
    server.child.kill('SIGTERM');
    await server.exited;

    exported = path.join(tempDir(), 'export');
    const result = await cliResult(source.env, ['export', '--to', exported]);
    expect(result.code, JSON.stringify(result.json)).toBe(0);
  });

  afterAll(async () => {
    await receiver?.close();
    await s3?.stop();
    for (const env of envs) await env.dispose();
    for (const dir of [...dirs, ...envs.map((e) => e.env.DATA_DIR)]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** A fresh PostgreSQL database and S3 bucket, as the target of an import. */
  async function postgresTarget(bucket: string): Promise<ServerEnv> {
    const target = await serverEnv('postgres', { ...(await s3.newBucket(bucket)), WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
    envs.push(target);
    return target;
  }

  async function countOf(env: ServerEnv, table: string): Promise<number> {
    const client = new pg.Client({ connectionString: env.env.DATABASE_URL });
    await client.connect();
    try {
      return Number((await client.query<{ n: string }>(`select count(*) as n from ${table}`)).rows[0]!.n);
    } finally {
      await client.end();
    }
  }

  async function tablesOf(env: ServerEnv): Promise<number> {
    const client = new pg.Client({ connectionString: env.env.DATABASE_URL });
    await client.connect();
    try {
      const { rows } = await client.query<{ n: string }>(
        `select count(*) as n from information_schema.tables where table_schema = 'public'`,
      );
      return Number(rows[0]!.n);
    } finally {
      await client.end();
    }
  }

  /** The sandbox moved with its organisation: its key reaches its contact and file bytes only, and the live key none of them. */
  async function expectSandboxKept(base: string): Promise<void> {
    const auth = { authorization: `Bearer ${testKey}` };
    const list = (await (await fetch(`${base}/api/v1/contacts`, { headers: auth })).json()) as { data: { id: string }[] };
    expect(list.data.map((c) => c.id)).toEqual([sandbox.contactId]);
    const link = (await (await fetch(`${base}/api/v1/files/${sandbox.fileId}/download`, { headers: auth })).json()) as { url: string };
    expect(sha256(new Uint8Array(await (await fetch(link.url)).arrayBuffer()))).toBe(sha256(testBytes));
    const live = await fetch(`${base}/api/v1/contacts/${sandbox.contactId}`, { headers: { authorization: `Bearer ${org.key}` } });
    expect(live.status).toBe(404);
  }

  it('writes every table, the file bytes and a manifest', () => {
    const manifest = JSON.parse(readFileSync(path.join(exported, 'manifest.json'), 'utf8')) as ExportManifest;
    expect(manifest).toMatchObject({ format: 'orgdata-export', format_version: 1, scope: 'instance', source_dialect: 'sqlite' });
    expect(manifest.migrations).toEqual(Object.keys(migrations));
    for (const table of ['orgs', 'users', 'memberships', 'api_keys', 'contacts', 'contact_metadata', 'labels', 'contact_labels']) {
      expect(manifest.tables[table]!.rows, table).toBeGreaterThan(0);
    }
    for (const table of ['groups', 'group_members', 'files', 'sessions', 'events', 'webhook_endpoints', 'webhook_deliveries']) {
      expect(manifest.tables[table]!.rows, table).toBeGreaterThan(0);
    }
    expect(manifest.tables.webhook_attempts!.rows).toBeGreaterThan(0);
    expect(manifest.tables.idempotency_keys!.rows).toBeGreaterThan(0);
    expect(Object.keys(manifest.tables)).not.toContain('contacts_fts');
    // The 26 live contacts and the sandbox's one; the live file's bytes and the sandbox's (under test/).
    expect(manifest.tables.contacts!.rows).toBe(27);
    expect(manifest.files.entries).toEqual(
      expect.arrayContaining([
        { key: expect.stringContaining(fileId), bytes: bytes.length, sha256: sha256(bytes) },
        { key: expect.stringMatching(new RegExp(`^test/sbx_\\w+/${sandbox.fileId}$`)), bytes: testBytes.length, sha256: sha256(testBytes) },
      ]),
    );
    expect(manifest.files.entries).toHaveLength(2);
    for (const entry of manifest.files.entries) expect(sha256(readFileSync(path.join(exported, 'files', entry.key)))).toBe(entry.sha256);
  });

  it('refuses a directory without a manifest, a tampered file and another SECRET_KEY, writing nothing', async () => {
    const target = await postgresTarget('refusals');
    const noManifest = path.join(tempDir(), 'unfinished');
    cpSync(exported, noManifest, { recursive: true });
    rmSync(path.join(noManifest, 'manifest.json'));
    expect(errorCode(await cliResult(target.env, ['import', '--from', noManifest]))).toBe('export_invalid');

    const tampered = path.join(tempDir(), 'tampered');
    cpSync(exported, tampered, { recursive: true });
    const contacts = path.join(tampered, 'tables', 'contacts.jsonl');
    writeFileSync(contacts, readFileSync(contacts, 'utf8').replace('Traveller', 'Tampered'));
    const damaged = await cliResult(target.env, ['import', '--from', tampered]);
    expect(errorCode(damaged)).toBe('export_invalid');
    expect(JSON.stringify(damaged.json)).toContain('contacts');

    const wrongSecret = await cliResult({ ...target.env, SECRET_KEY: 'another-secret-of-at-least-32-characters!' }, [
      'import',
      '--from',
      exported,
    ]);
    expect(errorCode(wrongSecret)).toBe('secret_key_mismatch');
    expect(JSON.stringify(wrongSecret.json)).toContain('SECRET_KEY');

    expect(await tablesOf(target)).toBe(0);
    expect(await s3.keys('refusals')).toEqual([]);

    // An export of an older orgdata (one migration fewer): upgrade it first.
    const older = path.join(tempDir(), 'older');
    cpSync(exported, older, { recursive: true });
    const manifest = JSON.parse(readFileSync(path.join(older, 'manifest.json'), 'utf8')) as ExportManifest;
    writeFileSync(path.join(older, 'manifest.json'), JSON.stringify({ ...manifest, migrations: manifest.migrations.slice(0, -1) }));
    const outdated = await cliResult(target.env, ['import', '--from', older]);
    expect(errorCode(outdated)).toBe('migrations_differ');
    expect(JSON.stringify(outdated.json)).toContain(Object.keys(migrations).at(-1)!);
    expect(await countOf(target, 'orgs')).toBe(0);

    // A bucket that already holds files.
    const occupied = await postgresTarget('occupied');
    await s3.client.send(new PutObjectCommand({ Bucket: 'occupied', Key: 'org_x/file_y', Body: 'already here' }));
    expect(errorCode(await cliResult(occupied.env, ['import', '--from', exported]))).toBe('target_not_empty');
    expect(await countOf(occupied, 'orgs')).toBe(0);
  });

  it('moves SQLite + local files to PostgreSQL + S3: keys, cursors, files, replays, search, sessions and webhooks keep working', async () => {
    const target = await postgresTarget('moved');
    const imported = await cliResult(target.env, ['import', '--from', exported]);
    expect(imported.code, JSON.stringify(imported.json)).toBe(0);
    expect((await s3.keys('moved')).filter((key) => key.includes(fileId))).toHaveLength(1);
    // Once: the target is no longer empty.
    const again = await cliResult(target.env, ['import', '--from', exported]);
    expect(errorCode(again)).toBe('target_not_empty');
    expect(await countOf(target, 'contacts')).toBe(27);

    const server = await startServerProcess(target);
    try {
      const headers = { authorization: `Bearer ${org.key}`, 'content-type': 'application/json' };
      const api = `${target.url}/api/v1`;
      expect(await listAll(target.url, org.key)).toEqual(contactsBefore);
      expect(await (await fetch(`${api}/contacts?limit=10&cursor=${cursor}`, { headers })).json()).toEqual(secondPage);
      const link = (await (await fetch(`${api}/files/${fileId}/download`, { headers })).json()) as { url: string };
      expect(sha256(new Uint8Array(await (await fetch(link.url)).arrayBuffer()))).toBe(sha256(bytes));
      const replay = await fetch(`${api}/contacts`, {
        method: 'POST',
        headers: { ...headers, 'idempotency-key': 'move-once-1' },
        body: idempotent.body,
      });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(((await replay.json()) as { id: string }).id).toBe(idempotent.id);
      const found = (await (await fetch(`${api}/contacts?q=zoe`, { headers })).json()) as { data: { first_name: string }[] };
      expect(found.data.map((c) => c.first_name)).toEqual(['Zoë']);
      const prefix = (await (await fetch(`${api}/contacts?q=travel&limit=100`, { headers })).json()) as { data: unknown[] };
      expect(prefix.data).toHaveLength(25);
      const dashboard = await fetch(`${target.url}/contacts`, { redirect: 'manual', headers: { cookie: sessionCookie } });
      expect(dashboard.status).toBe(200);
      await expectSandboxKept(target.url);

      const before = receiver.received.length;
      const created = (await (
        await fetch(`${api}/contacts`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ first_name: 'After', email: 'after@example.com' }),
        })
      ).json()) as { id: string };
      await receiver.until(
        () => receiver.received.slice(before).some((r) => JSON.stringify(r.event.data).includes(created.id)),
        30_000,
        'the webhook of a contact created after the move',
      );
      const delivered = receiver.received.slice(before).find((r) => JSON.stringify(r.event.data).includes(created.id))!;
      expect(delivered.verifiedWith).toBe(webhookSecret);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }

    // And back, PostgreSQL + S3 → SQLite + local files: the same rows in every table.
    const fromPostgres = path.join(tempDir(), 'from-postgres');
    const second = await cliResult(target.env, ['export', '--to', fromPostgres]);
    expect(second.code, JSON.stringify(second.json)).toBe(0);
    expect((second.json as unknown as ExportManifest).source_dialect).toBe('postgres');
    const port = await freePort();
    const back: ServerEnv = {
      env: { ...source.env, DATA_DIR: path.join(tempDir(), 'back'), PORT: String(port) },
      url: `http://127.0.0.1:${port}`,
      dispose: async () => {},
    };
    const returned = await cliResult(back.env, ['import', '--from', fromPostgres]);
    expect(returned.code, JSON.stringify(returned.json)).toBe(0);
    const roundTrip = path.join(tempDir(), 'round-trip');
    expect((await cliResult(back.env, ['export', '--to', roundTrip])).code).toBe(0);
    const manifest = JSON.parse(readFileSync(path.join(fromPostgres, 'manifest.json'), 'utf8')) as ExportManifest;
    for (const table of Object.keys(manifest.tables)) {
      expect(exportedRows(roundTrip, table), table).toEqual(exportedRows(fromPostgres, table));
    }
    // The SQLite-only search index was rebuilt by the inserts.
    const again2 = await startServerProcess(back);
    try {
      const found = (await (
        await fetch(`${back.url}/api/v1/contacts?q=zoe`, { headers: { authorization: `Bearer ${org.key}` } })
      ).json()) as {
        data: unknown[];
      };
      expect(found.data).toHaveLength(1);
      // The bytes came back from the bucket into DATA_DIR/files.
      const auth = { authorization: `Bearer ${org.key}` };
      const link = (await (await fetch(`${back.url}/api/v1/files/${fileId}/download`, { headers: auth })).json()) as { url: string };
      expect(sha256(new Uint8Array(await (await fetch(link.url)).arrayBuffer()))).toBe(sha256(bytes));
      await expectSandboxKept(back.url);
    } finally {
      again2.child.kill('SIGTERM');
      await again2.exited;
    }
  });

  it('exports one organisation for its owner: only its rows, its file bytes, no secrets; import refuses it', async () => {
    const dir = path.join(tempDir(), 'org');
    const result = await cliResult(source.env, ['org', 'export', '--org', org.orgId, '--to', dir]);
    expect(result.code, JSON.stringify(result.json)).toBe(0);
    const manifest = result.json as unknown as ExportManifest;
    expect(manifest).toMatchObject({ scope: 'org', org_id: org.orgId });
    // Both modes, marked: the manifest names the sandbox, whose rows carry its org_id.
    const sandboxId = manifest.modes?.test ?? '';
    expect(manifest.modes).toEqual({ live: org.orgId, test: expect.stringMatching(/^sbx_/) });
    expect(manifest.secret_fingerprint).toBeUndefined();
    expect(Object.keys(manifest.tables).sort()).toEqual(
      ['contact_labels', 'contact_metadata', 'contacts', 'events', 'files', 'group_members', 'groups', 'labels', 'orgs'].sort(),
    );
    for (const table of Object.keys(manifest.tables)) {
      for (const line of readFileSync(path.join(dir, 'tables', `${table}.jsonl`), 'utf8')
        .split('\n')
        .filter(Boolean)) {
        const row = JSON.parse(line) as { org_id?: string; id?: string };
        expect([org.orgId, sandboxId], table).toContain(table === 'orgs' ? row.id : row.org_id);
      }
    }
    expect(manifest.tables.contacts!.rows).toBe(27);
    const contactRows = exportedRows(dir, 'contacts').map((r) => JSON.parse(r) as { id: string; org_id: string });
    expect(contactRows.filter((c) => c.org_id === sandboxId).map((c) => c.id)).toEqual([sandbox.contactId]);
    const orgRows = exportedRows(dir, 'orgs').map((r) => JSON.parse(r) as { id: string; live_org_id: string | null });
    expect(orgRows).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: org.orgId, live_org_id: null }),
        expect.objectContaining({ id: sandboxId, live_org_id: org.orgId }),
      ]),
    );
    const fileHashes = manifest.files.entries.map((e) => sha256(readFileSync(path.join(dir, 'files', e.key))));
    expect(fileHashes).toEqual(expect.arrayContaining([sha256(bytes), sha256(testBytes)]));
    expect(manifest.files.entries.some((e) => e.key.startsWith(`test/${sandboxId}/`))).toBe(true);

    // What the instance export holds and an organisation's must not: key and password hashes,
    // sessions, webhook secrets, stored replays.
    const secrets = [
      ...exportedRows(exported, 'api_keys').map((r) => (JSON.parse(r) as { key_hash: string }).key_hash),
      ...exportedRows(exported, 'users').map((r) => (JSON.parse(r) as { password_hash: string }).password_hash),
      ...exportedRows(exported, 'sessions').map((r) => (JSON.parse(r) as { id_hash: string }).id_hash),
      webhookSecret,
      org.key,
      testKey,
      'move-once-1',
    ];
    expect(secrets.length).toBeGreaterThan(5);
    for (const { name, text } of everyFile(dir))
      for (const secret of secrets) expect(text.includes(secret), `${name} holds a secret`).toBe(false);
    expect(everyFile(dir).some(({ text }) => text.includes(otherOrg))).toBe(false);

    const target = await postgresTarget('org-refused');
    expect(errorCode(await cliResult(target.env, ['import', '--from', dir]))).toBe('export_scope');
    expect(existsSync(path.join(dir, 'manifest.json'))).toBe(true);
  });
});
