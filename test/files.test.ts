import { createHash, randomBytes, randomFillSync } from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { Readable } from 'node:stream';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { purgeAbandonedUploads } from '../src/domain/files/files.js';
import { SignedLinks } from '../src/domain/files/links.js';
import { openBlobStore } from '../src/infra/choose.js';
import { STORES, storeHarness, type StoreKind, type StoreProbe } from './helpers/blobStores.js';
import { checkResponse } from './helpers/contract.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { LocalS3 } from './helpers/localS3.js';

interface FileBody {
  object: 'file';
  id: string;
  name: string;
  content_type: string;
  size: number;
  status: 'pending' | 'ready';
  sha256: string | null;
  created_at: string;
  updated_at: string;
  uploaded_at: string | null;
}
interface Reservation extends FileBody {
  upload_url: string;
  upload_expires_at: string;
}

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const MiB = 1024 * 1024;
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
/** The path of an absolute link the API returned (app.inject and the test server take paths). */
const pathOf = (url: string) => new URL(url).pathname;
/** One character of `token` at `index` replaced by another allowed one. */
const alter = (token: string, index: number) => token.slice(0, index) + (token[index] === 'A' ? 'B' : 'A') + token.slice(index + 1);

async function waitFor(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  // A safety net against hanging, not a timing assertion.
  for (let i = 0; i < 1000; i++) {
    if (await condition()) return;
    await sleep(10);
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** A full garbage collection, including the backing stores V8 frees on the next turn. */
const collectGarbage = (() => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  return async () => {
    gc();
    await nextTurn();
    gc();
  };
})();

interface Memory {
  rss: number;
  arrayBuffers: number;
}
const memory = (): Memory => {
  const { rss, arrayBuffers } = process.memoryUsage();
  return { rss, arrayBuffers };
};

/** The S3-compatible server of the `s3` runs, shared by every suite of this file (a bucket each). */
let s3: LocalS3;
beforeAll(async () => {
  s3 = await LocalS3.start();
});
afterAll(() => s3.close());

/**
 * Memory a streamed 20 MiB transfer may hold, in MiB: at its peak (array buffers) and after it
 * (RSS). The local store holds a few chunks. The S3 store holds up to three 5 MiB multipart parts
 * at once (the one in flight, the one being assembled, and its copy when assembled), whatever the
 * file's size (about 15 MiB, still short of the 20 that holding the file would show); the
 * allocator may keep such freed buffers in the RSS afterwards. The RSS moves with the heap too:
 * the local store's grew 11.5 MiB on a machine busy with a CI run beside the tests (2026-11-29),
 * so its bound is 15, still short of the 20 the file would add (the array buffers are the exact
 * measure, and stay bounded at 10).
 */
const MAX_HELD_MIB: Record<StoreKind, { peak: number; rss: number }> = { local: { peak: 10, rss: 15 }, s3: { peak: 18, rss: 25 } };

function fileSuite(dialect: (typeof DIALECTS)[number], store: StoreKind) {
  let h: Harness;
  let probe: StoreProbe;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    ({ h, probe } = await storeHarness(dialect, store, s3));
    org = await h.newOrg();
    key = await org.key(['files:write']);
  });
  afterAll(() => h.close());
  afterEach(() => {
    vi.useRealTimers();
  });

  async function reserve(
    body: Partial<{ name: string; content_type: string; size: number }> = {},
    k = key,
    headers = {},
  ): Promise<Reservation> {
    const res = await h.call(k, 'POST', '/api/v1/files', { name: 'notes.txt', content_type: 'text/plain', size: 11, ...body }, headers);
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  }

  const put = (url: string, payload: Buffer | string, headers: Record<string, string> = {}) =>
    h.app.inject({ method: 'PUT', url: pathOf(url), headers: { 'content-type': 'application/octet-stream', ...headers }, payload });

  async function download(id: string, k = key): Promise<LightMyRequestResponse> {
    const link = await h.call(k, 'GET', `/api/v1/files/${id}/download`);
    expect(link.statusCode, link.body).toBe(200);
    return h.app.inject({ method: 'GET', url: pathOf(link.json().url) });
  }

  const getFile = async (id: string): Promise<FileBody> => (await h.call(key, 'GET', `/api/v1/files/${id}`)).json();
  const blobs = () => probe.blobs();
  const leftovers = () => probe.leftovers();

  it('reserves, uploads without an API key, gets and downloads a file byte-identical', async () => {
    const before = Date.now();
    const created = await h.call(key, 'POST', '/api/v1/files', { name: 'report.pdf', content_type: 'application/pdf', size: 11 });
    expect(created.statusCode, created.body).toBe(201);
    const r: Reservation = created.json();
    expect(r).toEqual({
      object: 'file',
      id: expect.stringMatching(/^file_[A-Za-z0-9]{20}$/),
      name: 'report.pdf',
      content_type: 'application/pdf',
      size: 11,
      status: 'pending',
      sha256: null,
      created_at: expect.stringMatching(TIMESTAMP),
      updated_at: r.created_at,
      uploaded_at: null,
      upload_url: expect.stringMatching(/^http:\/\/orgdata\.test\/uploads\/[A-Za-z0-9._-]+$/),
      upload_expires_at: expect.stringMatching(TIMESTAMP),
    });
    expect(created.headers.location).toBe(`/api/v1/files/${r.id}`);
    expect(Date.parse(r.upload_expires_at) - Date.parse(r.created_at)).toBe(900_000);
    expect(r.upload_url).not.toContain(key);
    const { upload_url: _u, upload_expires_at: _e, ...pending } = r;
    expect(await getFile(r.id)).toEqual(pending);
    const early = await h.call(key, 'GET', `/api/v1/files/${r.id}/download`);
    expect(early.statusCode).toBe(409);
    expect(early.json().code).toBe('file_not_ready');

    const bytes = Buffer.from('%PDF-1.7\n\x00\xff', 'latin1');
    const uploaded = await put(r.upload_url, bytes);
    expect(uploaded.statusCode, uploaded.body).toBe(200);
    const ready: FileBody = uploaded.json();
    expect(ready).toEqual({
      ...pending,
      status: 'ready',
      sha256: sha256(bytes),
      updated_at: expect.stringMatching(TIMESTAMP),
      uploaded_at: expect.stringMatching(TIMESTAMP),
    });
    expect(await getFile(r.id)).toEqual(ready);
    expect(await blobs()).toHaveLength(1);
    expect(await leftovers()).toEqual([]);

    const link = await h.call(key, 'GET', `/api/v1/files/${r.id}/download`);
    expect(link.statusCode).toBe(200);
    const body = link.json();
    expect(body).toEqual({
      object: 'file_download',
      file_id: r.id,
      url: expect.stringMatching(/^http:\/\/orgdata\.test\/downloads\/[A-Za-z0-9._-]+$/),
      expires_at: expect.stringMatching(TIMESTAMP),
    });
    expect(Date.parse(body.expires_at)).toBeGreaterThanOrEqual(before + 300_000);
    expect(Date.parse(body.expires_at)).toBeLessThanOrEqual(Date.now() + 300_000);
    const got = await h.app.inject({ method: 'GET', url: pathOf(body.url) });
    expect(got.statusCode).toBe(200);
    expect(got.rawPayload.equals(bytes)).toBe(true);
    expect(got.headers['content-type']).toBe('application/pdf');
    expect(got.headers['content-length']).toBe('11');
    expect(got.headers['x-content-type-options']).toBe('nosniff');
    expect(got.headers['content-disposition']).toBe(`attachment; filename="report.pdf"; filename*=UTF-8''report.pdf`);
    // The link works again until it expires.
    expect((await h.app.inject({ method: 'GET', url: pathOf(body.url) })).rawPayload.equals(bytes)).toBe(true);
  });

  it('ignores any Authorization header on upload and download links', async () => {
    const r = await reserve({ size: 3 });
    for (const authorization of ['Bearer od_live_not-a-real-key', 'Basic Zm9vOmJhcg==', `Bearer ${key}`]) {
      const refused = await put(r.upload_url, 'abcd', { authorization });
      expect(refused.statusCode).toBe(400);
      expect(refused.json().code).toBe('size_mismatch');
    }
    const ok = await put(r.upload_url, 'abc', { authorization: 'Bearer od_live_not-a-real-key' });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.headers['www-authenticate']).toBeUndefined();
    expect(ok.headers['ratelimit']).toBeUndefined();
    const link = (await h.call(key, 'GET', `/api/v1/files/${r.id}/download`)).json();
    const got = await h.app.inject({ method: 'GET', url: pathOf(link.url), headers: { authorization: 'Bearer garbage' } });
    expect(got.statusCode).toBe(200);
    expect(got.body).toBe('abc');
  });

  it('stores the body as raw bytes whatever its Content-Type, or without one', async () => {
    for (const [contentType, payload] of [
      ['application/json', '{"not": json'],
      ['application/x-www-form-urlencoded', 'a=1&b=2'],
      ['text/plain; charset=utf-8', 'héllo'],
      [null, Buffer.from([0, 1, 2, 3])],
    ] as [string | null, string | Buffer][]) {
      const bytes = Buffer.from(payload);
      const r = await reserve({ size: bytes.length });
      const res = await h.app.inject({
        method: 'PUT',
        url: pathOf(r.upload_url),
        headers: contentType ? { 'content-type': contentType } : {},
        payload: bytes,
      });
      expect(res.statusCode, `${contentType}: ${res.body}`).toBe(200);
      expect(res.json().sha256).toBe(sha256(bytes));
      expect((await download(r.id)).rawPayload.equals(bytes)).toBe(true);
    }
    // And an empty file.
    const empty = await reserve({ size: 0 });
    const res = await h.app.inject({ method: 'PUT', url: pathOf(empty.upload_url) });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ status: 'ready', size: 0, sha256: sha256('') });
    const got = await download(empty.id);
    expect(got.headers['content-length']).toBe('0');
    expect(got.rawPayload.length).toBe(0);
  });

  it('sends the stored type and a safely encoded attachment name on download', async () => {
    const name = 'Résumé "final" \\ 2026 (v2) 📄;.html';
    const r = await reserve({ name, content_type: 'text/html', size: 26 });
    const html = '<script>alert(1)</script>\n';
    expect((await put(r.upload_url, html)).statusCode).toBe(200);
    expect((await getFile(r.id)).name).toBe(name);
    const got = await download(r.id);
    expect(got.statusCode).toBe(200);
    expect(got.headers['content-type']).toBe('text/html');
    expect(got.headers['x-content-type-options']).toBe('nosniff');
    expect(got.headers['content-length']).toBe('26');
    const disposition = got.headers['content-disposition'] as string;
    expect(disposition).toMatch(/^attachment; filename="[\x20-\x7e]*"; filename\*=UTF-8''[A-Za-z0-9%!._~-]+$/);
    const fallback = /filename="([^"]*)"/.exec(disposition)![1]!;
    expect(fallback).not.toMatch(/["\\]/);
    expect(fallback).toBe('R_sum_ _final_ _ 2026 (v2) __;.html');
    expect(decodeURIComponent(/filename\*=UTF-8''(.*)$/.exec(disposition)![1]!)).toBe(name);
    expect(got.body).toBe(html);

    // Names that could break the header are refused at reservation.
    for (const bad of ['a\r\nSet-Cookie: x=1', 'tab\tname', 'nul\u0000']) {
      const res = await h.call(key, 'POST', '/api/v1/files', { name: bad, content_type: 'text/plain', size: 1 });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().errors.map((e: { field: string }) => e.field)).toContain('name');
    }
    for (const bad of ['text/html\r\nX-Evil: 1', 'text', 'text/', '/plain', 'text/plain; charset']) {
      const res = await h.call(key, 'POST', '/api/v1/files', { name: 'x', content_type: bad, size: 1 });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().errors.map((e: { field: string }) => e.field)).toContain('content_type');
    }
  });

  it('validates reservations and creates nothing on failure', async () => {
    const o = await h.newOrg();
    const k = await o.key(['files:write']);
    const cases: [unknown, string][] = [
      [{ content_type: 'text/plain', size: 1 }, 'name'],
      [{ name: 'a', size: 1 }, 'content_type'],
      [{ name: 'a', content_type: 'text/plain' }, 'size'],
      [{ name: '', content_type: 'text/plain', size: 1 }, 'name'],
      [{ name: ' ', content_type: 'text/plain', size: 1 }, 'name'],
      [{ name: 'n'.repeat(256), content_type: 'text/plain', size: 1 }, 'name'],
      [{ name: 'a', content_type: 'text/plain', size: -1 }, 'size'],
      [{ name: 'a', content_type: 'text/plain', size: 1.5 }, 'size'],
      [{ name: 'a', content_type: 'text/plain', size: '10' }, 'size'],
      [{ name: 'a', content_type: 'text/plain', size: 100 * MiB + 1 }, 'size'],
      [{ name: 'a', content_type: 'text/plain', size: 1, status: 'ready' }, 'status'],
      [{ name: 'a', content_type: 'text/plain', size: 1, sha256: 'x' }, 'sha256'],
    ];
    for (const [body, field] of cases) {
      const res = await h.call(k, 'POST', '/api/v1/files', body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
      expect(
        res.json().errors.map((e: { field: string }) => e.field),
        res.body,
      ).toContain(field);
    }
    expect((await h.call(k, 'GET', '/api/v1/files')).json().data).toEqual([]);
    // Exactly the maximum is fine.
    expect((await h.call(k, 'POST', '/api/v1/files', { name: 'a', content_type: 'text/plain', size: 100 * MiB })).statusCode).toBe(201);
  });

  it('refuses an upload of another size than reserved, and keeps the file pending with no bytes', async () => {
    const r = await reserve({ size: 10 });
    for (const payload of ['123456789', '12345678901', '']) {
      const res = await put(r.upload_url, payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json()).toMatchObject({ code: 'size_mismatch', status: 400 });
    }
    // A body without Content-Length (chunked) that runs past the reserved size, or falls short.
    for (const chunks of [
      ['12345', '678901234'],
      ['1234', '5'],
    ]) {
      const res = await h.app.inject({
        method: 'PUT',
        url: pathOf(r.upload_url),
        payload: Readable.from(chunks.map((c) => Buffer.from(c))),
      });
      expect(res.statusCode, res.body).toBe(400);
      expect(res.json().code).toBe('size_mismatch');
    }
    expect(await getFile(r.id)).toMatchObject({ status: 'pending', sha256: null });
    expect((await blobs()).filter((b) => b.includes(r.id))).toEqual([]);
    expect(await leftovers()).toEqual([]);
    // The link still works for the right bytes.
    const ok = await put(r.upload_url, '1234567890');
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json().sha256).toBe(sha256('1234567890'));
  });

  it('accepts one upload per file: a second one is 409 already_uploaded and changes nothing', async () => {
    const r = await reserve({ size: 5 });
    expect((await put(r.upload_url, 'first')).statusCode).toBe(200);
    const again = await put(r.upload_url, 'other');
    expect(again.statusCode).toBe(409);
    expect(again.json()).toMatchObject({ code: 'already_uploaded', status: 409 });
    expect((await download(r.id)).body).toBe('first');
    expect((await getFile(r.id)).sha256).toBe(sha256('first'));

    // Two uploads racing: one wins, the other is refused, and only one blob remains.
    const race = await reserve({ size: 4 });
    const results = await Promise.all([put(race.upload_url, 'aaaa'), put(race.upload_url, 'bbbb')]);
    expect(results.map((x) => x.statusCode).sort()).toEqual([200, 409]);
    const winner = results.find((x) => x.statusCode === 200)!.json();
    expect(['aaaa', 'bbbb'].map((x) => sha256(x))).toContain(winner.sha256);
    expect(sha256((await download(race.id)).rawPayload)).toBe(winner.sha256);
    expect((await blobs()).filter((b) => b.includes(race.id))).toHaveLength(1);
    expect(await leftovers()).toEqual([]);
  });

  it('answers 410 for an expired upload link and 403 for a tampered or foreign one', async () => {
    const r = await reserve({ size: 2 });
    const links = new SignedLinks(h.config.secretKey, h.config.publicUrl);
    const expired = links.uploadUrl(r.id, org.orgId, new Date(Date.now() - 1000));
    const gone = await put(expired, 'ok');
    expect(gone.statusCode).toBe(410);
    expect(gone.json()).toMatchObject({ code: 'upload_url_expired', status: 410 });
    expect(gone.headers['content-type']).toContain('application/problem+json');
    // A refused upload closes the connection instead of reading (draining) the body.
    expect(gone.headers.connection).toBe('close');

    const token = pathOf(r.upload_url).slice('/uploads/'.length);
    const dot = token.lastIndexOf('.');
    const forgedElsewhere = new SignedLinks('another-secret-that-is-at-least-32-chars-long', h.config.publicUrl);
    const bad = [
      alter(token, 7), // the file id
      alter(token, dot - 2), // the expiry
      alter(token, dot + 1), // the signature
      alter(token, token.length - 1),
      token.slice(0, -1),
      token.slice(0, dot),
      `${token}x`,
      'garbage',
      'a.b',
      pathOf(forgedElsewhere.uploadUrl(r.id, org.orgId, new Date(Date.now() + 60_000))).slice('/uploads/'.length),
      // A download token is not an upload token.
      pathOf(links.downloadUrl(r.id, org.orgId, new Date(Date.now() + 60_000))).slice('/downloads/'.length),
      // Even an expired link is checked for its signature first.
      alter(pathOf(expired).slice('/uploads/'.length), 7),
    ];
    for (const t of bad) {
      const res = await h.app.inject({ method: 'PUT', url: `/uploads/${t}`, payload: 'ok' });
      expect(res.statusCode, t).toBe(403);
      expect(res.json().code, t).toBe('invalid_signature');
      expect(res.headers.connection).toBe('close');
    }
    expect(await getFile(r.id)).toMatchObject({ status: 'pending' });
    expect((await put(r.upload_url, 'ok')).statusCode).toBe(200);
    // Expired after the upload too: still 410, never a second upload.
    expect((await put(expired, 'ok')).statusCode).toBe(410);
  });

  it('answers 410 for an expired download link, 403 for a tampered one, 409 while pending and 404 once deleted', async () => {
    const r = await reserve({ size: 4 });
    const links = new SignedLinks(h.config.secretKey, h.config.publicUrl);
    const pendingLink = links.downloadUrl(r.id, org.orgId, new Date(Date.now() + 60_000));
    const notReady = await h.app.inject({ method: 'GET', url: pathOf(pendingLink) });
    expect(notReady.statusCode).toBe(409);
    expect(notReady.json().code).toBe('file_not_ready');
    expect((await put(r.upload_url, 'data')).statusCode).toBe(200);

    const expired = await h.app.inject({ method: 'GET', url: pathOf(links.downloadUrl(r.id, org.orgId, new Date(Date.now() - 1))) });
    expect(expired.statusCode).toBe(410);
    expect(expired.json().status).toBe(410);
    const link = (await h.call(key, 'GET', `/api/v1/files/${r.id}/download`)).json();
    const token = pathOf(link.url).slice('/downloads/'.length);
    for (const t of [alter(token, 7), alter(token, token.length - 1), pathOf(r.upload_url).slice('/uploads/'.length)]) {
      const res = await h.app.inject({ method: 'GET', url: `/downloads/${t}` });
      expect(res.statusCode, t).toBe(403);
      expect(res.json().code).toBe('invalid_signature');
    }
    expect((await h.app.inject({ method: 'GET', url: pathOf(link.url) })).body).toBe('data');

    const deleted = await h.call(key, 'DELETE', `/api/v1/files/${r.id}`);
    expect(deleted.statusCode).toBe(200);
    expect((await h.app.inject({ method: 'GET', url: pathOf(link.url) })).statusCode).toBe(404);
  });

  it('lists files with a status filter, and binds cursors to the filter', async () => {
    const o = await h.newOrg();
    const k = await o.key(['files:write']);
    const made: Reservation[] = [];
    for (let i = 0; i < 5; i++) made.push(await reserve({ name: `f${i}.txt`, size: 1 }, k));
    for (const i of [1, 3, 4]) expect((await put(made[i]!.upload_url, `${i}`)).statusCode).toBe(200);

    const walk = async (query: string) => {
      const ids: string[] = [];
      let cursor: string | null = null;
      do {
        const res = await h.call(k, 'GET', `/api/v1/files?limit=2${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
        expect(res.statusCode, res.body).toBe(200);
        const body = res.json();
        expect(body.object).toBe('list');
        expect(body.has_more).toBe(body.next_cursor !== null);
        ids.push(...body.data.map((f: FileBody) => f.id));
        cursor = body.next_cursor;
      } while (cursor);
      return ids;
    };
    expect(await walk('')).toEqual(made.map((f) => f.id));
    expect(await walk('&status=ready')).toEqual([1, 3, 4].map((i) => made[i]!.id));
    expect(await walk('&status=pending')).toEqual([0, 2].map((i) => made[i]!.id));
    const readyPage = (await h.call(k, 'GET', '/api/v1/files?limit=1&status=ready')).json();
    for (const f of readyPage.data) expect(f.status).toBe('ready');

    const cursor = encodeURIComponent(readyPage.next_cursor);
    for (const url of [
      `/api/v1/files?status=pending&cursor=${cursor}`,
      `/api/v1/files?cursor=${cursor}`,
      `/api/v1/groups?cursor=${cursor}`,
    ]) {
      const k2 = url.includes('groups') ? await o.key(['groups:read']) : k;
      const res = await h.call(k2, 'GET', url);
      expect(res.statusCode, url).toBe(400);
      expect(res.json().code).toBe('invalid_cursor');
    }
    for (const bad of ['status=done', 'status=', 'state=ready']) {
      const res = await h.call(k, 'GET', `/api/v1/files?${bad}`);
      expect(res.statusCode, bad).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
  });

  it('deletes a file and its bytes; other organisations see nothing', async () => {
    const r = await reserve({ size: 6 });
    expect((await put(r.upload_url, 'secret')).statusCode).toBe(200);
    expect((await blobs()).filter((b) => b.includes(r.id))).toHaveLength(1);

    const other = await h.newOrg();
    const otherKey = await other.key(['files:write']);
    expect((await h.call(otherKey, 'GET', `/api/v1/files/${r.id}`)).statusCode).toBe(404);
    expect((await h.call(otherKey, 'GET', `/api/v1/files/${r.id}/download`)).statusCode).toBe(404);
    expect((await h.call(otherKey, 'DELETE', `/api/v1/files/${r.id}`)).statusCode).toBe(404);
    expect((await h.call(otherKey, 'GET', '/api/v1/files')).json().data).toEqual([]);

    const deleted = await h.call(key, 'DELETE', `/api/v1/files/${r.id}`);
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json()).toEqual({ object: 'file', id: r.id, deleted: true });
    expect((await blobs()).filter((b) => b.includes(r.id))).toEqual([]);
    expect((await h.call(key, 'GET', `/api/v1/files/${r.id}`)).statusCode).toBe(404);
    expect((await h.call(key, 'GET', `/api/v1/files/${r.id}/download`)).statusCode).toBe(404);
    expect((await h.call(key, 'DELETE', `/api/v1/files/${r.id}`)).statusCode).toBe(404);

    // A pending file can be deleted too; its upload link then finds nothing.
    const p = await reserve({ size: 1 });
    expect((await h.call(key, 'DELETE', `/api/v1/files/${p.id}`)).statusCode).toBe(200);
    const late = await put(p.upload_url, 'x');
    expect(late.statusCode).toBe(404);
    expect(late.json().code).toBe('not_found');
    expect((await blobs()).filter((b) => b.includes(p.id))).toEqual([]);
    expect(await leftovers()).toEqual([]);
  });

  it('replays a reservation with the same upload_url, even after it expired; a fresh key then works', async () => {
    const body = { name: 'replay.bin', content_type: 'application/octet-stream', size: 4 };
    const first = await h.call(key, 'POST', '/api/v1/files', body, { 'idempotency-key': 'file-replay' });
    expect(first.statusCode).toBe(201);
    const again = await h.call(key, 'POST', '/api/v1/files', body, { 'idempotency-key': 'file-replay' });
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    expect(again.json().upload_url).toBe(first.json().upload_url);
    expect(again.headers.location).toBe(first.headers.location);

    // Sixteen minutes later the replay still answers the same, now expired, link.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.parse(first.json().upload_expires_at) + 60_000);
    const late = await h.call(key, 'POST', '/api/v1/files', body, { 'idempotency-key': 'file-replay' });
    expect(late.statusCode).toBe(201);
    expect(late.headers['idempotent-replayed']).toBe('true');
    expect(late.json().upload_url).toBe(first.json().upload_url);
    const gone = await put(late.json().upload_url, 'data');
    expect(gone.statusCode).toBe(410);
    expect(gone.json().code).toBe('upload_url_expired');

    const fresh = await h.call(key, 'POST', '/api/v1/files', body, { 'idempotency-key': 'file-replay-2' });
    expect(fresh.statusCode).toBe(201);
    expect(fresh.headers['idempotent-replayed']).toBeUndefined();
    expect(fresh.json().id).not.toBe(first.json().id);
    // Back to the real clock: an object store refuses requests signed 16 minutes off its own time.
    vi.useRealTimers();
    const done = await put(fresh.json().upload_url, 'data');
    expect(done.statusCode, done.body).toBe(200);
    expect(done.json().status).toBe('ready');
    expect((await download(fresh.json().id)).body).toBe('data');
    // The abandoned reservation is still pending (until the purge removes it).
    expect((await getFile(first.json().id)).status).toBe('pending');

    const changed = await h.call(key, 'POST', '/api/v1/files', { ...body, size: 5 }, { 'idempotency-key': 'file-replay' });
    expect(changed.statusCode).toBe(422);
  });

  it('checks the scope of every operation', async () => {
    const ready = await reserve({ size: 1 });
    expect((await put(ready.upload_url, 'r')).statusCode).toBe(200);
    const reader = await org.key(['files:read']);
    const writer = await org.key(['files:write']);
    const outsider = await org.key(['contacts:write', 'groups:write']);
    const reads = ['/api/v1/files', `/api/v1/files/${ready.id}`, `/api/v1/files/${ready.id}/download`];
    for (const url of reads) {
      for (const k of [reader, writer]) expect((await h.call(k, 'GET', url)).statusCode, url).toBe(200);
      const denied = await h.call(outsider, 'GET', url);
      expect(denied.statusCode, url).toBe(403);
      expect(denied.json()).toMatchObject({ code: 'forbidden' });
      expect(denied.json().detail).toContain('files:read');
    }
    const writes: [string, string, unknown][] = [
      ['POST', '/api/v1/files', { name: 'x.txt', content_type: 'text/plain', size: 1 }],
      ['DELETE', `/api/v1/files/${ready.id}`, undefined],
    ];
    for (const [method, url, body] of writes) {
      for (const k of [reader, outsider]) {
        const denied = await h.call(k, method as 'POST', url, body);
        expect(denied.statusCode, `${method} ${url}`).toBe(403);
        expect(denied.json().code).toBe('forbidden');
        expect(denied.json().detail).toContain('files:write');
      }
    }
    expect((await getFile(ready.id)).status).toBe('ready');
    for (const [method, url, body] of writes) {
      const res = await h.call(writer, method as 'POST', url, body);
      expect([200, 201], `${method} ${url}`).toContain(res.statusCode);
    }
    for (const url of reads.slice(0, 2)) expect((await h.call(null, 'GET', url)).statusCode).toBe(401);
  });

  describe('over the network', () => {
    let base: string;
    beforeAll(async () => {
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });

    /** PUTs `body` to a link over a real connection; resolves with the answer. */
    function httpPut(
      url: string,
      body: Readable | Buffer,
      headers: Record<string, string | number>,
    ): Promise<{ status: number; body: string }> {
      return new Promise((resolve, reject) => {
        const req = http.request(`${base}${pathOf(url)}`, { method: 'PUT', headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            try {
              checkResponse('PUT', pathOf(url), res.statusCode!, res.headers, text);
            } catch (error) {
              return reject(error as Error);
            }
            resolve({ status: res.statusCode!, body: text });
          });
          res.on('error', reject);
        });
        req.on('error', reject);
        if (Buffer.isBuffer(body)) req.end(body);
        else body.pipe(req);
      });
    }

    it('streams a 20 MiB upload and download byte-identical while memory stays flat', async () => {
      const size = 20 * MiB;
      const r = await reserve({ name: 'big.bin', content_type: 'application/octet-stream', size });
      await collectGarbage();
      const baseline = memory();
      const samples: Memory[] = [];
      const sent = createHash('sha256');
      // The body is made as it is sent, 64 KiB at a time; every 2 MiB the memory is measured
      // (after a full collection, so only what is really held counts).
      async function* generate() {
        for (let offset = 0; offset < size; offset += 64 * 1024) {
          if (offset % (2 * MiB) === 0 && offset > 0) {
            await collectGarbage();
            samples.push(memory());
          }
          const chunk = randomFillSync(Buffer.allocUnsafe(64 * 1024));
          sent.update(chunk);
          yield chunk;
        }
      }
      const uploaded = await httpPut(r.upload_url, Readable.from(generate()), {
        'content-type': 'application/octet-stream',
        'content-length': size,
      });
      expect(uploaded.status, uploaded.body).toBe(200);
      const sentHash = sent.digest('hex');
      const file = JSON.parse(uploaded.body) as FileBody;
      expect(file).toMatchObject({ status: 'ready', size, sha256: sentHash });

      const link = (await h.call(key, 'GET', `/api/v1/files/${r.id}/download`)).json();
      const received = createHash('sha256');
      let receivedBytes = 0;
      const { status, headers } = await new Promise<{ status: number; headers: http.IncomingHttpHeaders }>((resolve, reject) => {
        http
          .get(`${base}${pathOf(link.url)}`, { headers: { authorization: 'Bearer nonsense' } }, (res) => {
            let nextSample = 2 * MiB;
            res.on('data', (chunk: Buffer) => {
              received.update(chunk);
              receivedBytes += chunk.length;
              if (receivedBytes >= nextSample) {
                nextSample += 2 * MiB;
                res.pause();
                void collectGarbage().then(() => {
                  samples.push(memory());
                  res.resume();
                });
              }
            });
            res.on('end', () => {
              try {
                // The bytes were hashed as they streamed: status and content type are checked.
                checkResponse('GET', pathOf(link.url), res.statusCode!, res.headers);
              } catch (error) {
                return reject(error as Error);
              }
              resolve({ status: res.statusCode!, headers: res.headers });
            });
            res.on('error', reject);
          })
          .on('error', reject);
      });
      expect(status).toBe(200);
      expect(headers['content-length']).toBe(String(size));
      expect(headers['content-type']).toBe('application/octet-stream');
      expect(receivedBytes).toBe(size);
      const receivedHash = received.digest('hex');
      expect(receivedHash).toBe(sentHash);
      expect(receivedHash).toBe(file.sha256);

      await collectGarbage();
      const after = memory();
      samples.push(after);
      expect(samples.length).toBeGreaterThanOrEqual(15);
      // Holding the file would show as 20 MiB of array buffers at some point of the transfer;
      // streaming holds a few chunks at most. (The RSS is compared before and after only: it
      // also moves with the heap and the allocator, so its transient peaks say little.)
      const peak = Math.max(...samples.map((s) => s.arrayBuffers)) - baseline.arrayBuffers;
      expect(peak / MiB).toBeLessThan(MAX_HELD_MIB[store].peak);
      expect((after.arrayBuffers - baseline.arrayBuffers) / MiB).toBeLessThan(10);
      expect((after.rss - baseline.rss) / MiB).toBeLessThan(MAX_HELD_MIB[store].rss);
    });

    it('leaves an upload cut off halfway pending, with no partial bytes, and the link still works', async () => {
      // Big enough that the S3 store has sent a 5 MiB multipart part before the cut.
      const size = 12 * MiB;
      const r = await reserve({ name: 'cut.bin', content_type: 'application/octet-stream', size });
      const bytes = randomBytes(size);
      const { port } = new URL(base);
      const socket = net.connect(Number(port), '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(
        `PUT ${pathOf(r.upload_url)} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`,
      );
      socket.write(bytes.subarray(0, (size * 2) / 3));
      // Wait until the store holds some of what arrived, then cut the connection.
      await waitFor('bytes in the store', async () => (await probe.receivedBytes()) >= 5 * MiB);
      socket.destroy();
      await waitFor('the partial upload to be removed', async () => (await leftovers()).length === 0);

      expect(await getFile(r.id)).toMatchObject({ status: 'pending', sha256: null, uploaded_at: null });
      expect((await blobs()).filter((b) => b.includes(r.id))).toEqual([]);
      expect(await leftovers()).toEqual([]);
      const dl = await h.call(key, 'GET', `/api/v1/files/${r.id}/download`);
      expect(dl.statusCode).toBe(409);

      const retry = await httpPut(r.upload_url, bytes, { 'content-type': 'application/octet-stream', 'content-length': size });
      expect(retry.status, retry.body).toBe(200);
      expect(JSON.parse(retry.body)).toMatchObject({ status: 'ready', sha256: sha256(bytes) });
      expect((await blobs()).filter((b) => b.includes(r.id))).toHaveLength(1);
      expect(await leftovers()).toEqual([]);
      expect(sha256((await download(r.id)).rawPayload)).toBe(sha256(bytes));
    });

    it('answers a chunked upload of the wrong length with 400 size_mismatch over a real connection', async () => {
      const r = await reserve({ size: 10 });
      for (const chunks of [['0123456789', 'ABCD'], ['01234']]) {
        const res = await httpPut(r.upload_url, Readable.from(chunks.map((c) => Buffer.from(c))), {
          'content-type': 'application/octet-stream',
        });
        expect(res.status, res.body).toBe(400);
        expect(JSON.parse(res.body).code).toBe('size_mismatch');
      }
      expect((await getFile(r.id)).status).toBe('pending');
      expect(await leftovers()).toEqual([]);
      const ok = await httpPut(r.upload_url, Readable.from([Buffer.from('01234'), Buffer.from('56789')]), {});
      expect(ok.status, ok.body).toBe(200);
    });
  });
}

describe.each(DIALECTS.flatMap((dialect) => STORES.map((store) => [dialect, store] as const)))(
  'files on %s, %s store',
  (dialect, store) => {
    fileSuite(dialect, store);

    describe('size limits', () => {
      let small: Harness;
      let smallProbe: StoreProbe;
      let key: string;
      beforeAll(async () => {
        ({ h: small, probe: smallProbe } = await storeHarness(dialect, store, s3, { env: { MAX_FILE_BYTES: '1000' } }));
        key = await (await small.newOrg()).key(['files:write']);
      });
      afterAll(() => small.close());

      const reserve = async (size: number) => {
        const res = await small.call(key, 'POST', '/api/v1/files', { name: 'a.bin', content_type: 'application/octet-stream', size });
        return res;
      };

      it('refuses a reservation over MAX_FILE_BYTES and an upload declaring more than it', async () => {
        const over = await reserve(1001);
        expect(over.statusCode).toBe(400);
        expect(over.json().code).toBe('invalid_request');
        expect(over.json().errors).toEqual([{ field: 'size', message: expect.stringContaining('1000') }]);

        const r = (await reserve(1000)).json();
        const tooLarge = await small.app.inject({ method: 'PUT', url: pathOf(r.upload_url), payload: Buffer.alloc(2000) });
        expect(tooLarge.statusCode).toBe(413);
        expect(tooLarge.json()).toMatchObject({ code: 'payload_too_large', status: 413 });
        expect(tooLarge.headers.connection).toBe('close');
        const short = await small.app.inject({ method: 'PUT', url: pathOf(r.upload_url), payload: Buffer.alloc(999) });
        expect(short.statusCode).toBe(400);
        expect(short.json().code).toBe('size_mismatch');
        // Without a Content-Length the store stops at the reserved size.
        const chunked = await small.app.inject({
          method: 'PUT',
          url: pathOf(r.upload_url),
          payload: Readable.from([Buffer.alloc(600), Buffer.alloc(600)]),
        });
        expect(chunked.statusCode).toBe(400);
        expect(chunked.json().code).toBe('size_mismatch');
        expect(await smallProbe.blobs()).toEqual([]);
        expect(await smallProbe.leftovers()).toEqual([]);

        const ok = await small.app.inject({ method: 'PUT', url: pathOf(r.upload_url), payload: Buffer.alloc(1000, 7) });
        expect(ok.statusCode, ok.body).toBe(200);
        expect(ok.json().sha256).toBe(sha256(Buffer.alloc(1000, 7)));
      });

      it.runIf(dialect === 'postgres')('answers 413 for a reservation made before MAX_FILE_BYTES was lowered', async () => {
        const big = await makeHarness(dialect, { shareDbWith: small });
        try {
          const bigKey = await (await big.newOrg()).key(['files:write']);
          const res = await big.call(bigKey, 'POST', '/api/v1/files', {
            name: 'a.bin',
            content_type: 'application/octet-stream',
            size: 1500,
          });
          expect(res.statusCode).toBe(201);
          const tooLarge = await small.app.inject({ method: 'PUT', url: pathOf(res.json().upload_url), payload: Buffer.alloc(1500) });
          expect(tooLarge.statusCode).toBe(413);
          expect(tooLarge.json().code).toBe('payload_too_large');
        } finally {
          await big.close();
        }
      });
    });

    describe('purging abandoned uploads', () => {
      let p: Harness;
      let pProbe: StoreProbe;
      beforeAll(async () => {
        ({ h: p, probe: pProbe } = await storeHarness(dialect, store, s3));
      });
      afterAll(() => p.close());

      it('deletes pending reservations whose link expired, keeps the rest, and sweeps old partial files', async () => {
        const k = await (await p.newOrg()).key(['files:write']);
        const made = async (size: number) =>
          (
            await p.call(k, 'POST', '/api/v1/files', { name: 'p.bin', content_type: 'application/octet-stream', size })
          ).json() as Reservation;
        const abandoned = await made(3);
        const uploaded = await made(3);
        expect((await p.app.inject({ method: 'PUT', url: pathOf(uploaded.upload_url), payload: 'abc' })).statusCode).toBe(200);

        await pProbe.plantLeftover('stale', new Date(Date.now() - 2 * 24 * 3600 * 1000));
        await pProbe.plantLeftover('fresh', new Date());
        const blobStore = await openBlobStore(p.config);

        // Before the link expires nothing goes.
        expect(await purgeAbandonedUploads(p.db.kysely, blobStore, new Date(Date.parse(abandoned.upload_expires_at) - 1))).toBe(0);
        expect((await p.call(k, 'GET', `/api/v1/files/${abandoned.id}`)).statusCode).toBe(200);

        const later = await made(3); // its link outlives the purge below
        expect(await purgeAbandonedUploads(p.db.kysely, blobStore, new Date(Date.parse(abandoned.upload_expires_at) + 1))).toBe(1);
        expect((await p.call(k, 'GET', `/api/v1/files/${abandoned.id}`)).statusCode).toBe(404);
        expect((await p.call(k, 'GET', `/api/v1/files/${uploaded.id}`)).json().status).toBe('ready');
        expect((await p.call(k, 'GET', `/api/v1/files/${later.id}`)).json().status).toBe('pending');
        expect(await pProbe.leftovers()).toEqual([expect.stringContaining('fresh')]);
        const gone = await p.app.inject({ method: 'PUT', url: pathOf(abandoned.upload_url), payload: 'abc' });
        expect(gone.statusCode).toBe(404);

        const list = (await p.call(k, 'GET', '/api/v1/files?status=pending')).json();
        expect(list.data.map((f: FileBody) => f.id)).toEqual([later.id]);
      });
    });
  },
);
