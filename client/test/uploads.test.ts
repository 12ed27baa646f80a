import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Orgdata, OrgdataError } from '../src/index.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

interface Sent {
  method: string;
  path: string;
  authorization: string | null;
  idempotencyKey: string | null;
  status: number;
}

/** A fetch that records what the client sends, and can hold back the first PUT to an upload link. */
function recordingFetch({ delayFirstPutMs = 0 } = {}) {
  const sent: Sent[] = [];
  let delayed = false;
  const wrapped: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    const headers = new Headers(init?.headers);
    if (init?.method === 'PUT' && url.pathname.startsWith('/uploads/') && !delayed && delayFirstPutMs > 0) {
      delayed = true;
      await new Promise((resolve) => setTimeout(resolve, delayFirstPutMs)); // the link expires meanwhile
    }
    const response = await fetch(input, init);
    sent.push({
      method: init?.method ?? 'GET',
      path: url.pathname,
      authorization: headers.get('authorization'),
      idempotencyKey: headers.get('idempotency-key'),
      status: response.status,
    });
    return response;
  };
  return { fetch: wrapped, sent };
}

describe('uploads (real server, UPLOAD_URL_TTL_SECONDS=1)', () => {
  let server: OrgdataServer;

  beforeAll(async () => {
    server = await startServer({ UPLOAD_URL_TTL_SECONDS: '1' });
  }, 60_000);
  afterAll(() => server?.stop());

  it('uploads a Buffer: reserve, PUT without the key, ready with its sha256; then a download link', async () => {
    const { fetch, sent } = recordingFetch();
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch });
    const bytes = randomBytes(64 * 1024);
    const file = await orgdata.files.upload({ name: 'a.bin', contentType: 'application/octet-stream', body: bytes });
    expect(file).toMatchObject({ object: 'file', name: 'a.bin', status: 'ready', size: bytes.length, sha256: sha256(bytes) });
    // (With 1 s links a slow machine may need a second reservation: the order holds either way.)
    expect(sent[0]).toMatchObject({ method: 'POST', path: '/api/v1/files', status: 201 });
    expect(sent.at(-1)).toMatchObject({ method: 'PUT', status: 200 });
    for (const request of sent) {
      // The key goes to the API only; the upload link is the capability.
      expect(request.authorization).toBe(request.path.startsWith('/uploads/') ? null : `Bearer ${server.apiKey}`);
    }
    const link = await orgdata.files.downloadUrl(file.id);
    expect(link).toMatchObject({ object: 'file_download', file_id: file.id });
    const downloaded = new Uint8Array(await (await globalThis.fetch(link.url)).arrayBuffer());
    expect(sha256(downloaded)).toBe(sha256(bytes));
    expect(await orgdata.files.get(file.id)).toEqual(file);
  });

  it('an expired upload URL is reserved again with a FRESH key and PUT once more; the file ends ready', async () => {
    const { fetch, sent } = recordingFetch({ delayFirstPutMs: 1_500 });
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch });
    const bytes = randomBytes(10_000);
    const file = await orgdata.files.upload({
      name: 'late.bin',
      contentType: 'application/octet-stream',
      body: bytes,
      idempotencyKey: 'upload-late-1',
    });
    expect(file).toMatchObject({ status: 'ready', size: bytes.length, sha256: sha256(bytes) });

    const reserves = sent.filter((s) => s.method === 'POST');
    const puts = sent.filter((s) => s.method === 'PUT');
    expect(puts.map((s) => s.status)).toEqual([410, 200]);
    expect(reserves.map((s) => s.status)).toEqual([201, 201]);
    expect(reserves[0]!.idempotencyKey).toBe('upload-late-1');
    expect(reserves[1]!.idempotencyKey).not.toBe('upload-late-1');
    expect(reserves[1]!.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/);
    // The abandoned reservation was deleted; the one file left is the ready one.
    const files = [];
    for await (const f of orgdata.files.list()) if (f.name === 'late.bin') files.push(f);
    expect(files.map((f) => [f.id, f.status])).toEqual([[file.id, 'ready']]);
  });

  it('a replayed reservation whose link has already expired is reserved again before any byte is sent', async () => {
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    const bytes = Buffer.from('replayed reservation');
    const first = await orgdata.files.reserve(
      { name: 'replay.txt', content_type: 'text/plain', size: bytes.length },
      { idempotencyKey: 'replay-upload-1' },
    );
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const { fetch, sent } = recordingFetch();
    const again = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch });
    const file = await again.files.upload({
      name: 'replay.txt',
      contentType: 'text/plain',
      body: bytes,
      idempotencyKey: 'replay-upload-1',
    });
    expect(file).toMatchObject({ status: 'ready', sha256: sha256(bytes) });
    expect(file.id).not.toBe(first.id);
    expect(sent.map((s) => `${s.method} ${s.status}`)).toEqual(['POST 201', 'DELETE 200', 'POST 201', 'PUT 200']);
  });

  it('uploads a Node Readable of a known size, and a Blob', async () => {
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    const chunks = Array.from({ length: 8 }, () => randomBytes(16 * 1024));
    const all = Buffer.concat(chunks);
    const streamed = await orgdata.files.upload({
      name: 's.bin',
      contentType: 'application/octet-stream',
      body: Readable.from(chunks),
      size: all.length,
    });
    expect(streamed).toMatchObject({ status: 'ready', size: all.length, sha256: sha256(all) });

    const blob = new Blob(['hello, ', 'blob']);
    const fromBlob = await orgdata.files.upload({ name: 'b.txt', contentType: 'text/plain', body: blob });
    expect(fromBlob).toMatchObject({ status: 'ready', size: 11, sha256: sha256(Buffer.from('hello, blob')) });
  });

  it('a stream body whose link expired is sent again when given as a function', async () => {
    const { fetch, sent } = recordingFetch({ delayFirstPutMs: 1_500 });
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch });
    const bytes = randomBytes(50_000);
    const file = await orgdata.files.upload({
      name: 'fn.bin',
      contentType: 'application/octet-stream',
      body: () => Readable.from([bytes.subarray(0, 20_000), bytes.subarray(20_000)]),
      size: bytes.length,
    });
    expect(file).toMatchObject({ status: 'ready', sha256: sha256(bytes) });
    expect(sent.filter((s) => s.method === 'PUT').map((s) => s.status)).toEqual([410, 200]);
  });

  it('a one-shot Readable whose link expired goes again from what was kept of it (no whole-file buffer)', async () => {
    const { fetch, sent } = recordingFetch({ delayFirstPutMs: 1_500 });
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch });
    const bytes = randomBytes(6 * 1024 * 1024);
    const chunks = Array.from({ length: bytes.length / 65_536 }, (_, i) => bytes.subarray(i * 65_536, (i + 1) * 65_536));
    const file = await orgdata.files.upload({
      name: 'once.bin',
      contentType: 'application/octet-stream',
      body: Readable.from(chunks),
      size: bytes.length,
    });
    expect(file).toMatchObject({ status: 'ready', size: bytes.length, sha256: sha256(bytes) });
    // The refused PUT is a 410, or (a large body still being written when the server closed) a broken pipe.
    expect(sent.filter((s) => s.method === 'POST')).toHaveLength(2);
    expect(sent.filter((s) => s.method === 'PUT').at(-1)!.status).toBe(200);
  });

  it('a body stream that waits 1.5 s before its first byte is re-reserved (fresh key) and ends ready with the right sha256', async () => {
    const { fetch, sent } = recordingFetch();
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl, fetch });
    const bytes = randomBytes(100_000);
    async function* slow() {
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      yield bytes.subarray(0, 50_000);
      yield bytes.subarray(50_000);
    }
    const file = await orgdata.files.upload({
      name: 'slow.bin',
      contentType: 'application/octet-stream',
      body: Readable.from(slow()),
      size: bytes.length,
    });
    expect(file).toMatchObject({ status: 'ready', size: bytes.length, sha256: sha256(bytes) });
    // fetch sends the request when the first chunk is ready: by then the 1 s link has expired.
    expect(sent.map((s) => `${s.method} ${s.status}`)).toEqual(['POST 201', 'PUT 410', 'DELETE 200', 'POST 201', 'PUT 200']);
  });

  it('refuses a stream without a size, and a size that does not match the bytes', async () => {
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    await expect(orgdata.files.upload({ name: 'x', contentType: 'text/plain', body: Readable.from(['x']) })).rejects.toThrow(/size/);
    await expect(orgdata.files.upload({ name: 'x', contentType: 'text/plain', body: Buffer.from('abc'), size: 4 })).rejects.toThrow(/size/);
  });

  it('a download link of a pending file is refused with file_not_ready', async () => {
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    const pending = await orgdata.files.reserve({ name: 'p.txt', content_type: 'text/plain', size: 3 });
    const error = await orgdata.files.downloadUrl(pending.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OrgdataError);
    expect((error as OrgdataError).code).toBe('file_not_ready');
    expect(await orgdata.files.delete(pending.id)).toEqual({ object: 'file', id: pending.id, deleted: true });
  });
});
