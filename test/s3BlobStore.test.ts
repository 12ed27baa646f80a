import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../src/config.js';
import { loadConfig } from '../src/config/load.js';
import { contentDisposition } from '../src/domain/files/contentDisposition.js';
import { SignedLinks } from '../src/domain/files/links.js';
import { openBlobStore } from '../src/infra/choose.js';
import { purgeDueBlobs } from '../src/domain/files/purges.js';
import { DIALECTS, makeHarness, SECRET, type Harness } from './helpers/harness.js';
import { LocalS3 } from './helpers/localS3.js';

const MiB = 1024 * 1024;
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const pathOf = (url: string) => new URL(url).pathname;

async function waitFor(what: string, condition: () => boolean): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    if (condition()) return;
    await sleep(10);
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** Sends `head` and `first` on a new connection, then `rest` once `between` resolves; answers the response text. */
function interruptedPut(port: number, head: string, first: Buffer, between: () => Promise<void>, rest: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', () => undefined); // writes after the server closed: the answer is what counts
    socket.on('close', () => resolve(Buffer.concat(received).toString()));
    socket.once('connect', () => {
      socket.write(head);
      socket.write(first);
      between().then(() => socket.write(rest), reject);
    });
  });
}

let s3: LocalS3;
beforeAll(async () => {
  s3 = await LocalS3.start();
});
afterAll(() => s3.close());

describe.each(DIALECTS)('the S3 blob store on %s', (dialect) => {
  let h: Harness;
  let bucket: string;
  let key: string;
  let orgId: string;
  beforeAll(async () => {
    const made = await s3.newBucket({ S3_PRESIGNED_DOWNLOADS: 'true' });
    bucket = made.bucket;
    h = await makeHarness(dialect, { env: made.env });
    const org = await h.newOrg();
    orgId = org.orgId;
    key = await org.key(['files:write']);
  });
  afterAll(() => h.close());

  async function reserve(name: string, content_type: string, size: number): Promise<{ id: string; upload_url: string }> {
    const res = await h.call(key, 'POST', '/api/v1/files', { name, content_type, size });
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  }
  const put = (url: string, payload: Buffer | string) =>
    h.app.inject({ method: 'PUT', url: pathOf(url), headers: { 'content-type': 'application/octet-stream' }, payload });

  it('stores the bytes under {org_id}/{file_id} and removes the object on delete', async () => {
    const r = await reserve('a.txt', 'text/plain', 5);
    expect((await put(r.upload_url, 'hello')).statusCode).toBe(200);
    expect(await s3.keys(bucket)).toContain(`${orgId}/${r.id}`);
    expect((await s3.keys(bucket)).filter((k) => k.startsWith('staging/'))).toEqual([]);

    expect((await h.call(key, 'DELETE', `/api/v1/files/${r.id}`)).statusCode).toBe(200);
    expect((await s3.keys(bucket)).filter((k) => k.includes(r.id))).toEqual([]);
  });

  it('leaves no object and no open multipart upload when a multipart upload is refused', async () => {
    // 12 MiB declared in chunks, 13 MiB sent: two parts have gone to the bucket when the meter refuses.
    const r = await reserve('big.bin', 'application/octet-stream', 12 * MiB);
    const body = [randomBytes(6 * MiB), randomBytes(6 * MiB), randomBytes(MiB)];
    const res = await h.app.inject({
      method: 'PUT',
      url: pathOf(r.upload_url),
      payload: (async function* () {
        yield* body;
      })(),
    });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().code).toBe('size_mismatch');
    expect((await s3.keys(bucket)).filter((k) => k.includes(r.id))).toEqual([]);
    expect(s3.openUploads(bucket)).toEqual([]);
    expect((await h.call(key, 'GET', `/api/v1/files/${r.id}`)).json().status).toBe('pending');
  });

  it('hands out a presigned S3 link with our lifetime, Content-Type and Content-Disposition', async () => {
    const name = 'Résumé "final" 📄.pdf';
    const bytes = randomBytes(1000);
    const r = await reserve(name, 'application/pdf', bytes.length);
    expect((await put(r.upload_url, bytes)).statusCode).toBe(200);

    const before = Date.now();
    const link = await h.call(key, 'GET', `/api/v1/files/${r.id}/download`);
    expect(link.statusCode, link.body).toBe(200);
    const { url, expires_at } = link.json();
    const presigned = new URL(url);
    expect(`${presigned.origin}${presigned.pathname}`).toBe(`${s3.endpoint}/${bucket}/${orgId}/${r.id}`);
    expect(presigned.searchParams.get('X-Amz-Expires')).toBe('300');
    expect(Date.parse(expires_at) - before).toBeGreaterThanOrEqual(299_000);
    expect(Date.parse(expires_at) - before).toBeLessThanOrEqual(301_000);
    expect(url).not.toContain(key);

    const got = await fetch(url);
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(bytes)).toBe(true);
    // The same headers our own /downloads link sends.
    const ours = await h.app.inject({
      method: 'GET',
      url: pathOf(new SignedLinks(SECRET, h.config.publicUrl).downloadUrl(r.id, orgId, new Date(Date.now() + 60_000))),
    });
    expect(got.headers.get('content-type')).toBe('application/pdf');
    expect(got.headers.get('content-type')).toBe(ours.headers['content-type']);
    expect(got.headers.get('content-disposition')).toBe(contentDisposition(name));
    expect(got.headers.get('content-disposition')).toBe(ours.headers['content-disposition']);
    expect(got.headers.get('cache-control')).toBe('private, no-store');

    // A link past its lifetime is refused by the store.
    const store = await openBlobStore(h.config);
    const headers = { contentType: 'application/pdf', contentDisposition: contentDisposition(name) };
    const stale = await store.directDownloadUrl(
      `${orgId}/${r.id}`,
      headers,
      new Date(Date.now() - 600_000),
      new Date(Date.now() - 300_000),
    );
    expect((await fetch(stale!)).status).toBe(403);
  });

  describe('while the bucket is unreachable', () => {
    afterAll(() => s3.resume().catch(() => undefined));

    it('answers 503 storage_unavailable, keeps the file pending, and the same PUT works once it is back', async () => {
      const r = await reserve('outage.txt', 'text/plain', 4);
      const kept = await reserve('kept.txt', 'text/plain', 4);
      expect((await put(kept.upload_url, 'keep')).statusCode).toBe(200);
      await s3.stop();

      const refused = await put(r.upload_url, 'data');
      expect(refused.statusCode, refused.body).toBe(503);
      expect(refused.json()).toMatchObject({ status: 503, code: 'storage_unavailable' });
      expect(refused.headers['retry-after']).toBe('5');
      expect(refused.headers['content-type']).toContain('application/problem+json');
      expect(refused.body).not.toMatch(/ECONNREFUSED|127\.0\.0\.1/);
      expect((await h.call(key, 'GET', `/api/v1/files/${r.id}`)).json()).toMatchObject({ status: 'pending', sha256: null });

      // Downloads through orgdata fail the same way.
      const own = new SignedLinks(SECRET, h.config.publicUrl).downloadUrl(kept.id, orgId, new Date(Date.now() + 60_000));
      const download = await h.app.inject({ method: 'GET', url: pathOf(own) });
      expect(download.statusCode).toBe(503);
      expect(download.json().code).toBe('storage_unavailable');
      // A delete needs no store: the file is gone at once, its bytes wait in the purge ledger.
      const deleted = await h.call(key, 'DELETE', `/api/v1/files/${kept.id}`);
      expect(deleted.statusCode, deleted.body).toBe(200);
      expect((await h.call(key, 'GET', `/api/v1/files/${kept.id}`)).statusCode).toBe(404);
      expect(await h.db.kysely.selectFrom('blob_purges').select('storage_key').execute()).toEqual([{ storage_key: `${orgId}/${kept.id}` }]);

      await s3.resume();
      const retried = await put(r.upload_url, 'data');
      expect(retried.statusCode, retried.body).toBe(200);
      expect(retried.json()).toMatchObject({ status: 'ready', sha256: sha256('data') });
      expect(await fetch((await h.call(key, 'GET', `/api/v1/files/${r.id}/download`)).json().url).then((x) => x.text())).toBe('data');
      // Housekeeping removes the deleted file's bytes once the bucket is back, and its ledger row.
      expect((await s3.keys(bucket)).filter((k) => k.includes(kept.id))).toHaveLength(1);
      expect(await purgeDueBlobs(h.db.kysely, await openBlobStore(h.config), new Date())).toBe(1);
      expect((await s3.keys(bucket)).filter((k) => k.includes(kept.id))).toEqual([]);
      expect(await h.db.kysely.selectFrom('blob_purges').selectAll().execute()).toEqual([]);
    });

    it('answers 503 when the bucket goes away in the middle of a streamed upload', async () => {
      const size = 12 * MiB;
      const r = await reserve('mid.bin', 'application/octet-stream', size);
      const bytes = randomBytes(size);
      const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
      try {
        const head = `PUT ${pathOf(r.upload_url)} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/octet-stream\r\nContent-Length: ${size}\r\n\r\n`;
        const answer = await interruptedPut(
          Number(new URL(base).port),
          head,
          bytes.subarray(0, 8 * MiB),
          async () => {
            // Once a part has reached the bucket, take the bucket away.
            await waitFor('a part in the bucket', () => s3.openUploads(bucket).some((u) => u.bytes >= 5 * MiB));
            await s3.stop();
          },
          bytes.subarray(8 * MiB),
        );
        expect(answer).toMatch(/^HTTP\/1\.1 503 /);
        expect(answer).toContain('"code":"storage_unavailable"');
        expect((await h.call(key, 'GET', `/api/v1/files/${r.id}`)).json().status).toBe('pending');

        await s3.resume();
        const retried = await put(r.upload_url, bytes);
        expect(retried.statusCode, retried.body).toBe(200);
        expect(retried.json().sha256).toBe(sha256(bytes));
      } finally {
        await s3.resume().catch(() => undefined);
      }
    });
  });
});

describe('S3 configuration', () => {
  const base = { DATA_DIR: '/tmp/orgdata-config-test', SECRET_KEY: SECRET, BLOB_STORE: 's3', S3_BUCKET: 'my-bucket' };
  const refusal = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (error) {
      if (error instanceof ConfigError) return error.variable;
      throw error;
    }
    return null;
  };

  it('defaults to the local store, and reads the S3 settings with BLOB_STORE=s3', () => {
    expect(loadConfig({ DATA_DIR: base.DATA_DIR, SECRET_KEY: SECRET })).toMatchObject({ blobStore: 'local', s3: null });
    expect(loadConfig(base).s3).toEqual({
      bucket: 'my-bucket',
      region: 'us-east-1',
      endpoint: null,
      forcePathStyle: false,
      credentials: null,
      presignedDownloads: false,
    });
    const full = loadConfig({
      ...base,
      S3_REGION: 'eu-west-3',
      S3_ENDPOINT: 'http://127.0.0.1:9000/',
      S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: 'AKIA',
      S3_SECRET_ACCESS_KEY: 'secret',
      S3_PRESIGNED_DOWNLOADS: 'true',
    });
    expect(full.s3).toEqual({
      bucket: 'my-bucket',
      region: 'eu-west-3',
      endpoint: 'http://127.0.0.1:9000',
      forcePathStyle: true,
      credentials: { accessKeyId: 'AKIA', secretAccessKey: 'secret' },
      presignedDownloads: true,
    });
  });

  it('refuses bad values, naming the variable', () => {
    expect(refusal({ ...base, BLOB_STORE: 'gcs' })).toBe('BLOB_STORE');
    expect(refusal({ ...base, S3_BUCKET: '' })).toBe('S3_BUCKET');
    expect(refusal({ ...base, S3_BUCKET: 'Bad_Bucket' })).toBe('S3_BUCKET');
    expect(refusal({ ...base, S3_REGION: 'EU West' })).toBe('S3_REGION');
    expect(refusal({ ...base, S3_ENDPOINT: 'ftp://store' })).toBe('S3_ENDPOINT');
    expect(refusal({ ...base, S3_FORCE_PATH_STYLE: 'yes' })).toBe('S3_FORCE_PATH_STYLE');
    expect(refusal({ ...base, S3_PRESIGNED_DOWNLOADS: '1' })).toBe('S3_PRESIGNED_DOWNLOADS');
    expect(refusal({ ...base, S3_ACCESS_KEY_ID: 'AKIA' })).toBe('S3_SECRET_ACCESS_KEY');
    expect(refusal({ ...base, S3_SECRET_ACCESS_KEY: 'secret' })).toBe('S3_ACCESS_KEY_ID');
    expect(refusal({ ...base, S3_PRESIGNED_DOWNLOADS: 'true', DOWNLOAD_URL_TTL_SECONDS: '604801' })).toBe('DOWNLOAD_URL_TTL_SECONDS');
    expect(refusal({ ...base, MAX_FILE_BYTES: String(6 * 1024 ** 3) })).toBe('MAX_FILE_BYTES');
    // Without BLOB_STORE=s3 the S3 variables are not read.
    expect(refusal({ ...base, BLOB_STORE: 'local', S3_BUCKET: '' })).toBeNull();
  });
});
