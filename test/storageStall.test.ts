import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { S3rverProcess } from './helpers/s3rverProcess.js';
import { startServerProcess } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';

/**
 * A bucket that accepts connections but never answers (s3rver stopped with SIGSTOP) must not hold
 * the database: before, `DELETE /files/{id}` called the store inside its transaction and a SQLite
 * instance answered nothing else for ~190 s. Now no call to the store happens inside a
 * transaction, every call has a deadline (503 storage_unavailable within ~20 s), other requests
 * are served meanwhile, and a server killed while a delete waits on the store leaves the bytes in
 * the purge ledger, removed by housekeeping once the store is back.
 *
 * On PostgreSQL, as a bucket is shared by several instances and a server refuses BLOB_STORE=s3
 * without DATABASE_URL (each run in a database of its own, serverEnv). With one connection in the
 * pool, like SQLite's one writer: a store call inside a transaction would hold it, and every other
 * request would wait, as on the SQLite instance that found the bug.
 */
const QUICK_MS = 5_000;
/** What a call to a stalled store may take before it is given up (deadline 20 s, with slack). */
const STALLED_MS = 45_000;

async function timed(url: string, init: RequestInit = {}): Promise<{ status: number; ms: number; body: string }> {
  const started = Date.now();
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(120_000) });
  const body = await res.text();
  return { status: res.status, ms: Date.now() - started, body };
}

const dialect = 'postgres';

describe.skipIf(!process.env.TEST_DATABASE_URL)('PostgreSQL with the S3 bucket stalled', () => {
  let s3: S3rverProcess;
  const bucket = `stall-${randomBytes(4).toString('hex')}`;
  beforeAll(async () => {
    s3 = await S3rverProcess.start();
  }, 120_000);
  // Registered before the server, so stopped after it (vitest runs afterAll hooks last first).
  afterAll(async () => {
    await s3?.stop();
  });
  const suite = suiteServer(dialect, async () => ({ ...(await s3.newBucket(bucket)), DATABASE_POOL_SIZE: '1' }), {
    org: true,
    stopWith: 'SIGKILL',
  });

  const api = (path: string, init: RequestInit = {}) =>
    timed(`${suite.url}/api/v1${path}`, {
      ...init,
      headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json', ...(init.headers ?? {}) },
    });
  async function uploaded(name: string, bytes: string): Promise<string> {
    const reserved = await api('/files', {
      method: 'POST',
      body: JSON.stringify({ name, content_type: 'text/plain', size: bytes.length }),
    });
    expect(reserved.status, reserved.body).toBe(201);
    const { id, upload_url } = JSON.parse(reserved.body) as { id: string; upload_url: string };
    if (bytes) expect((await timed(upload_url, { method: 'PUT', body: bytes })).status).toBe(200);
    return id;
  }
  const objectsOf = async (id: string) => (await s3.keys(bucket)).filter((key) => key.includes(id));

  it('serves everything else at once, and answers each storage call within its deadline', async () => {
    const a = await uploaded('a.txt', 'aaaa');
    const b = await uploaded('b.txt', 'bbbb');
    const reserved = await api('/files', { method: 'POST', body: JSON.stringify({ name: 'c.txt', content_type: 'text/plain', size: 4 }) });
    const c = JSON.parse(reserved.body) as { id: string; upload_url: string };
    const download = JSON.parse((await api(`/files/${b}/download`)).body) as { url: string };
    expect(await objectsOf(a)).toHaveLength(1);

    s3.stall();
    try {
      // Three calls that wait on the store, all at once.
      const deleting = api(`/files/${a}`, { method: 'DELETE' });
      const uploading = timed(c.upload_url, { method: 'PUT', body: 'cccc' });
      const downloading = timed(download.url);
      await new Promise((resolve) => setTimeout(resolve, 1_000));

      // Meanwhile the database serves every other request (reads, writes, events).
      const others = [
        await api('/contacts'),
        await api('/contacts', { method: 'POST', body: JSON.stringify({ first_name: 'Grace', email: `grace-${dialect}@example.com` }) }),
        await api('/events'),
        await api(`/files/${b}`),
      ];
      for (const res of others) {
        expect(res.status, res.body).toBeLessThan(300);
        expect(res.ms).toBeLessThan(QUICK_MS);
      }
      // The file is deleted at once, answered within a second (its bytes wait for the store); its events are there.
      expect((await api(`/files/${a}`)).status).toBe(404);

      const deleted = await deleting;
      expect(deleted.status, deleted.body).toBe(200);
      expect(deleted.ms).toBeLessThan(QUICK_MS); // it needs no bucket: the purge goes on after the answer
      const upload = await uploading;
      expect(upload.status, upload.body).toBe(503);
      expect(JSON.parse(upload.body)).toMatchObject({ code: 'storage_unavailable' });
      expect(upload.ms).toBeLessThan(STALLED_MS);
      const got = await downloading;
      expect(got.status, got.body).toBe(503);
      expect(got.ms).toBeLessThan(STALLED_MS);
      expect(JSON.parse((await api(`/files/${c.id}`)).body)).toMatchObject({ status: 'pending' });
    } finally {
      // A new store process: what the stalled one held unanswered (the delete) is lost with it.
      await s3.restart();
    }
    // Back: the same PUT works, and the deleted file's bytes go with the next housekeeping round
    // (here: a restart, which runs one at once).
    expect((await timed(c.upload_url, { method: 'PUT', body: 'cccc' })).status).toBe(200);
    expect(await objectsOf(a)).toHaveLength(1);
    suite.server.child.kill('SIGTERM');
    await suite.server.exited;
    suite.server = await startServerProcess(suite.env);
    await expect.poll(() => objectsOf(a), { timeout: 15_000 }).toEqual([]);
    expect(await objectsOf(b)).toHaveLength(1);
  }, 180_000);

  it('a server killed while a delete waits on the store leaves nothing orphaned', async () => {
    const d = await uploaded('d.txt', 'dddd');
    s3.stall();
    try {
      const deleting = api(`/files/${d}`, { method: 'DELETE' }).catch(() => null);
      // Committed: the file is gone from the API while its bytes wait for the stalled store.
      await expect.poll(async () => (await api(`/files/${d}`)).status, { timeout: QUICK_MS }).toBe(404);
      suite.server.child.kill('SIGKILL');
      await suite.server.exited;
      await deleting;
    } finally {
      await s3.restart();
    }
    expect(await objectsOf(d)).toHaveLength(1);
    suite.server = await startServerProcess(suite.env);
    await expect.poll(() => objectsOf(d), { timeout: 15_000 }).toEqual([]);
  }, 120_000);
});
