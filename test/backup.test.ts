import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import type { BackupManifest } from '../src/cli/backup.js';
import { migrations } from '../src/db/database.js';
import { freePort, orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';
import { cliEntry } from './helpers/cliEntry.js';

const run = promisify(execFile);
const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));

/** The operator CLI as a process: its exit code and its --json answer (or error). */
async function cli(env: Record<string, string>, args: string[]): Promise<{ code: number; json: Record<string, unknown> }> {
  try {
    const { stdout } = await run(process.execPath, [...CLI, ...args, '--json'], { env });
    return { code: 0, json: JSON.parse(stdout) as Record<string, unknown> };
  } catch (error) {
    const { code, stdout } = error as { code: number; stdout: string };
    return { code, json: JSON.parse(stdout) as Record<string, unknown> };
  }
}

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

// Issue 19, item 1: `orgdata backup` of a running SQLite installation and `orgdata restore`.
describe('backup and restore of a SQLite installation', { timeout: 300_000 }, () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-backup-'));
    dirs.push(dir);
    return dir;
  };
  let source: ServerEnv;
  afterAll(async () => {
    await source?.dispose();
    for (const dir of [...dirs, source?.env.DATA_DIR]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('copies the data of a server under writes, and the copy restored into a new DATA_DIR serves the same', async () => {
    // No SECRET_KEY: the server keeps its generated secret.key in DATA_DIR, and the backup carries it.
    source = await serverEnv('sqlite', { SECRET_KEY: '' });
    const { key, orgId, email } = await orgWithKey(source.env);
    // Test mode (SANDBOX.md): the sandbox is in the same database and blob store, and must come back too.
    const testKey = (
      await cli(source.env, [
        'keys',
        'create',
        '--org',
        orgId,
        '--admin-email',
        email,
        '--name',
        'sandbox',
        '--scopes',
        'contacts:write,files:write',
        '--test',
      ])
    ).json.key as string;
    expect(testKey).toMatch(/^od_test_/);
    const server = await startServerProcess(source);
    const api = `${source.url}/api/v1`;
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const post = async (url: string, body: unknown) => {
      const res = await fetch(`${api}${url}`, { method: 'POST', headers, body: JSON.stringify(body) });
      expect(res.status, await res.clone().text()).toBeLessThan(300);
      return (await res.json()) as Record<string, unknown> & { id: string };
    };
    const label = await post('/contacts/labels', { name: 'Backed up' });
    const contacts = [];
    for (let i = 0; i < 20; i++) {
      contacts.push(
        await post('/contacts', {
          first_name: `Kept${i}`,
          last_name: 'Safe',
          email: `kept${i}@example.com`,
          label_ids: [label.id],
          metadata: { tier: 'gold' },
        }),
      );
    }
    const bytes = randomBytes(200_000);
    const file = await post('/files', { name: 'data.bin', content_type: 'application/octet-stream', size: bytes.length });
    expect((await fetch(String(file.upload_url), { method: 'PUT', body: bytes })).status).toBe(200);
    const testHeaders = { authorization: `Bearer ${testKey}`, 'content-type': 'application/json' };
    const testPost = async (url: string, body: unknown) => {
      const res = await fetch(`${api}${url}`, { method: 'POST', headers: testHeaders, body: JSON.stringify(body) });
      expect(res.status, await res.clone().text()).toBeLessThan(300);
      return (await res.json()) as Record<string, unknown> & { id: string };
    };
    const sandboxContact = await testPost('/contacts', { first_name: 'Sandy', email: 'sandy@example.com' });
    const testBytes = randomBytes(10_000);
    const testFile = await testPost('/files', { name: 'test.bin', content_type: 'application/octet-stream', size: testBytes.length });
    expect((await fetch(String(testFile.upload_url), { method: 'PUT', body: testBytes })).status).toBe(200);
    const doomed = await post('/files', { name: 'doomed.txt', content_type: 'text/plain', size: 5 });
    expect((await fetch(String(doomed.upload_url), { method: 'PUT', body: 'bytes' })).status).toBe(200);

    // A writer loop while the backup runs: contacts created, and a file deleted.
    let writing = true;
    let written = 0;
    const writer = (async () => {
      for (let n = 0; writing; n++) {
        await post('/contacts', { first_name: 'During', email: `during${n}@example.com` });
        written++;
      }
    })();
    await new Promise((resolve) => setTimeout(resolve, 300));
    const target = path.join(tempDir(), 'backup');
    const [backup] = await Promise.all([
      cli(source.env, ['backup', '--to', target]),
      fetch(`${api}/files/${doomed.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } }),
    ]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    writing = false;
    await writer;
    expect(backup.code, JSON.stringify(backup.json)).toBe(0);
    server.child.kill('SIGTERM');
    await server.exited;

    const manifest = backup.json as unknown as BackupManifest;
    expect(manifest).toMatchObject({ format: 'orgdata-backup', format_version: 1, secret_key: 'included' });
    expect(manifest.database.migrations.at(-1)).toBe(Object.keys(migrations).at(-1));
    const backedUp = manifest.database.tables.contacts!;
    expect(written).toBeGreaterThan(0);
    // The 20 live contacts, the sandbox's one, and some of those written during the backup.
    expect(backedUp).toBeGreaterThanOrEqual(21);
    expect(backedUp).toBeLessThanOrEqual(21 + written);
    expect(manifest.files.entries.map((e) => e.sha256)).toContain(sha256(bytes));
    expect(JSON.parse(readFileSync(path.join(target, 'manifest.json'), 'utf8'))).toEqual(manifest);

    // Into a new DATA_DIR, with no SECRET_KEY either: the backup's secret.key comes along.
    const port = await freePort();
    const restored: ServerEnv = {
      env: { ...source.env, DATA_DIR: path.join(tempDir(), 'restored'), PORT: String(port) },
      url: `http://127.0.0.1:${port}`,
      dispose: async () => {},
    };
    const restore = await cli(restored.env, ['restore', '--from', target]);
    expect(restore.code, JSON.stringify(restore.json)).toBe(0);
    const again = await startServerProcess(restored);
    try {
      const auth = { authorization: `Bearer ${key}` };
      let seen = 0;
      for (let cursor: string | null = null; ;) {
        const res = await fetch(`${restored.url}/api/v1/contacts?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { headers: auth });
        expect(res.status).toBe(200);
        const page = (await res.json()) as { data: unknown[]; next_cursor: string | null };
        seen += page.data.length;
        if (!(cursor = page.next_cursor)) break;
      }
      expect(seen).toBe(backedUp - 1);
      // The sandbox came back whole and apart: its key sees its one contact and its file's bytes.
      const testAuth = { authorization: `Bearer ${testKey}` };
      const sandboxList = (await (await fetch(`${restored.url}/api/v1/contacts`, { headers: testAuth })).json()) as {
        data: { id: string }[];
      };
      expect(sandboxList.data.map((c) => c.id)).toEqual([sandboxContact.id]);
      const testLink = (await (await fetch(`${restored.url}/api/v1/files/${testFile.id}/download`, { headers: testAuth })).json()) as {
        url: string;
      };
      expect(sha256(new Uint8Array(await (await fetch(testLink.url)).arrayBuffer()))).toBe(sha256(testBytes));
      expect((await fetch(`${restored.url}/api/v1/contacts/${sandboxContact.id}`, { headers: auth })).status).toBe(404);
      const found = (await (await fetch(`${restored.url}/api/v1/contacts?q=kept7`, { headers: auth })).json()) as {
        data: { id: string }[];
      };
      expect(found.data.map((c) => c.id)).toEqual([contacts[7]!.id]);
      const labelled = (await (
        await fetch(`${restored.url}/api/v1/contacts?label_id=${label.id}&metadata%5Btier%5D=gold`, { headers: auth })
      ).json()) as {
        data: unknown[];
      };
      expect(labelled.data).toHaveLength(20);
      const link = (await (await fetch(`${restored.url}/api/v1/files/${file.id}/download`, { headers: auth })).json()) as { url: string };
      const downloaded = new Uint8Array(await (await fetch(link.url)).arrayBuffer());
      expect(sha256(downloaded)).toBe(sha256(bytes));
      // The file deleted while the backup ran is either whole in the copy or not in it at all.
      const doomedNow = await fetch(`${restored.url}/api/v1/files/${doomed.id}/download`, { headers: auth });
      if (doomedNow.status === 200) {
        const url = ((await doomedNow.json()) as { url: string }).url;
        expect(await (await fetch(url)).text()).toBe('bytes');
      } else {
        expect(doomedNow.status).toBe(404);
      }
    } finally {
      again.child.kill('SIGTERM');
      await again.exited;
    }

    // A restore never lands on data, and a changed byte makes a backup invalid.
    const onto = await cli(restored.env, ['restore', '--from', target]);
    expect([onto.code, (onto.json.error as { code: string }).code]).toEqual([1, 'target_not_empty']);
    const over = await cli(source.env, ['backup', '--to', target]);
    expect([over.code, (over.json.error as { code: string }).code]).toEqual([1, 'target_not_empty']);
    const tampered = path.join(tempDir(), 'tampered');
    cpSync(target, tampered, { recursive: true });
    const liveEntry = manifest.files.entries.find((e) => e.key.includes(String(file.id)))!;
    expect(manifest.files.entries.some((e) => e.key.startsWith('test/'))).toBe(true);
    const blob = path.join(tampered, 'files', 'blobs', liveEntry.key);
    const changed = readFileSync(blob);
    changed[0] = changed[0]! ^ 1;
    writeFileSync(blob, changed);
    const fresh = { ...restored.env, DATA_DIR: path.join(tempDir(), 'fresh') };
    const invalid = await cli(fresh, ['restore', '--from', tampered]);
    expect([invalid.code, (invalid.json.error as { code: string }).code]).toEqual([1, 'backup_invalid']);
    expect(existsSync(path.join(fresh.DATA_DIR, 'orgdata.sqlite'))).toBe(false);
    rmSync(path.join(tampered, 'manifest.json'));
    expect(((await cli(fresh, ['restore', '--from', tampered])).json.error as { code: string }).code).toBe('backup_invalid');

    // A refused restore takes back what it wrote and nothing else: a DATA_DIR the operator made
    // (a mount point, say) stays, with any file of theirs; one restore created goes.
    const own = tempDir();
    writeFileSync(path.join(own, 'operator-notes.txt'), 'mine');
    const occupied = await cli({ ...restored.env, DATA_DIR: own }, ['restore', '--from', target]);
    expect([occupied.code, (occupied.json.error as { code: string }).code]).toEqual([1, 'target_not_empty']);
    expect(readFileSync(path.join(own, 'operator-notes.txt'), 'utf8')).toBe('mine');
    expect(readdirSync(own)).toEqual(['operator-notes.txt']);
    // Fails after it began writing: the rows of a table are not the manifest's (which no checksum covers).
    const miscounted = path.join(tempDir(), 'miscounted');
    cpSync(target, miscounted, { recursive: true });
    const counted = JSON.parse(readFileSync(path.join(miscounted, 'manifest.json'), 'utf8')) as BackupManifest;
    counted.database.tables.contacts! += 1;
    writeFileSync(path.join(miscounted, 'manifest.json'), JSON.stringify(counted));
    const mounted = tempDir();
    const late = await cli({ ...restored.env, DATA_DIR: mounted }, ['restore', '--from', miscounted]);
    expect([late.code, (late.json.error as { code: string }).code]).toEqual([1, 'backup_invalid']);
    expect(existsSync(mounted)).toBe(true);
    expect(readdirSync(mounted)).toEqual([]);
    const created = path.join(tempDir(), 'made-by-restore', 'data');
    const lateNew = await cli({ ...restored.env, DATA_DIR: created }, ['restore', '--from', miscounted]);
    expect([lateNew.code, (lateNew.json.error as { code: string }).code]).toEqual([1, 'backup_invalid']);
    expect(existsSync(path.dirname(created))).toBe(false);

    // Bytes missing from the store while their file still exists: the backup fails, naming it.
    rmSync(path.join(source.env.DATA_DIR!, 'files', 'blobs', liveEntry.key));
    const lost = await cli(source.env, ['backup', '--to', path.join(tempDir(), 'lost')]);
    expect([lost.code, (lost.json.error as { code: string }).code]).toEqual([1, 'backup_failed']);
    expect((lost.json.error as { message: string }).message).toContain(String(file.id));
  });

  it('says how to back up PostgreSQL instead of pretending to', async () => {
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: tempDir() };
    const pgEnv = { ...env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', SECRET_KEY: 's'.repeat(40) };
    for (const args of [
      ['backup', '--to', path.join(tempDir(), 'b')],
      ['restore', '--from', tempDir()],
    ]) {
      const res = await cli(pgEnv, args);
      expect(res.code).toBe(1);
      expect(res.json.error).toMatchObject({ code: 'not_supported' });
      expect((res.json.error as { message: string }).message).toContain('pg_dump');
    }
  });
});
