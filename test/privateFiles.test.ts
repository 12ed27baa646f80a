import { execFile } from 'node:child_process';
import { chmodSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';
import { cliEntry } from './helpers/cliEntry.js';

const run = promisify(execFile);
const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));

/** Every file and folder below `dir` (itself included) whose mode is not 0600 / 0700, as `path mode`. */
function loose(dir: string): string[] {
  const found: string[] = [];
  const visit = (at: string) => {
    const stat = lstatSync(at);
    const wanted = stat.isDirectory() ? 0o700 : 0o600;
    if ((stat.mode & 0o777) !== wanted) found.push(`${path.relative(dir, at) || '.'} ${(stat.mode & 0o777).toString(8)}`);
    if (stat.isDirectory()) for (const entry of readdirSync(at)) visit(path.join(at, entry));
  };
  visit(dir);
  return found;
}

const files = (dir: string): string[] => {
  const found: string[] = [];
  const visit = (at: string) => {
    for (const entry of readdirSync(at, { withFileTypes: true })) {
      if (entry.isDirectory()) visit(path.join(at, entry.name));
      else found.push(path.relative(dir, path.join(at, entry.name)));
    }
  };
  visit(dir);
  return found.sort();
};

// Issue 43, item 4: what the server and the CLI write is readable by its owner only, whatever the umask.
describe('private files under DATA_DIR and in backups', { timeout: 240_000 }, () => {
  let previousUmask: number;
  let source: ServerEnv;
  const work = mkdtempSync(path.join(tmpdir(), 'orgdata-private-'));
  beforeAll(() => {
    // The server and the CLI inherit the most common umask: files 0644, folders 0755.
    previousUmask = process.umask(0o022);
  });
  afterAll(async () => {
    process.umask(previousUmask);
    await source?.dispose();
  });

  it('keeps the database, its WAL, secret.key, uploads, backups and restores at 0600 / 0700', async () => {
    // A DATA_DIR as an older version left it: open to everyone, with a file of 0644 in it.
    const dataDir = path.join(work, 'data');
    mkdirSync(path.join(dataDir, 'files', 'blobs'), { recursive: true, mode: 0o755 });
    chmodSync(dataDir, 0o755);
    writeFileSync(path.join(dataDir, 'files', 'blobs', 'old-upload'), 'personal data', { mode: 0o644 });
    source = await serverEnv('sqlite', { SECRET_KEY: '', DATA_DIR: dataDir });
    const { key } = await orgWithKey(source.env);
    const server = await startServerProcess(source);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    for (let i = 0; i < 5; i++) {
      const res = await fetch(`${source.url}/api/v1/contacts`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ first_name: `Private${i}`, email: `private${i}@example.com` }),
      });
      expect(res.status).toBe(201);
    }
    const reserved = (await (
      await fetch(`${source.url}/api/v1/files`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ name: 'a.txt', content_type: 'text/plain', size: 5 }),
      })
    ).json()) as { upload_url: string };
    expect((await fetch(reserved.upload_url, { method: 'PUT', body: 'bytes' })).status).toBe(200);
    // While the server runs: the database, its WAL and shared memory, the secret, the upload.
    expect(files(dataDir)).toEqual(expect.arrayContaining(['orgdata.sqlite', 'orgdata.sqlite-wal', 'secret.key']));
    expect(loose(dataDir)).toEqual([]);

    const backupDir = path.join(work, 'backup');
    mkdirSync(backupDir, { mode: 0o755 });
    chmodSync(backupDir, 0o755);
    await run(process.execPath, [...CLI, 'backup', '--to', backupDir, '--json'], { env: source.env });
    server.child.kill('SIGTERM');
    await server.exited;
    expect(files(backupDir)).toEqual(expect.arrayContaining(['manifest.json', 'orgdata.sqlite', 'secret.key']));
    expect(files(backupDir).some((f) => f.startsWith('files/blobs/'))).toBe(true);
    expect(loose(backupDir)).toEqual([]);

    // A backup whose files a copy made 0644 is restored private all the same.
    const looseBackup = path.join(work, 'loose-backup');
    await run('cp', ['-r', backupDir, looseBackup]);
    for (const file of files(looseBackup)) chmodSync(path.join(looseBackup, file), 0o644);
    const restoredDir = path.join(work, 'restored');
    const port = await freePort();
    const restored = { ...source.env, DATA_DIR: restoredDir, PORT: String(port) };
    await run(process.execPath, [...CLI, 'restore', '--from', looseBackup, '--json'], { env: restored });
    expect(files(restoredDir)).toEqual(expect.arrayContaining(['orgdata.sqlite', 'secret.key']));
    expect(loose(restoredDir)).toEqual([]);
    const again = await startServerProcess({ env: restored, url: `http://127.0.0.1:${port}`, dispose: async () => {} });
    try {
      const listed = await fetch(`http://127.0.0.1:${port}/api/v1/contacts`, { headers });
      expect(listed.status).toBe(200);
    } finally {
      again.child.kill('SIGTERM');
      await again.exited;
    }
    expect(loose(restoredDir)).toEqual([]);

    // An export is as private.
    const exported = path.join(work, 'export');
    await run(process.execPath, [...CLI, 'export', '--to', exported, '--json'], { env: source.env });
    expect(loose(exported)).toEqual([]);
  });
});
