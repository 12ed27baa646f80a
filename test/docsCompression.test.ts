import { request } from 'node:http';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chooseEncoding } from '../src/http/encodedAsset.js';
import { findRedocBundle, INIT_SCRIPT, INIT_SCRIPT_URL } from '../src/http/redocAssets.js';
import { docsRoutes } from '../src/http/routes/docs.js';

/** A GET without fetch's own Accept-Encoding and decompression: the bytes as sent, over HTTP. */
function get(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * /docs' scripts are sent compressed as the browser accepts (issue 42: Redoc's 1.1 MB bundle went
 * uncompressed): brotli, else gzip, else identity; each with `Vary: Accept-Encoding`, its own ETag
 * and a Content-Length that is the length of the bytes sent.
 */
describe("the API reference's scripts, compressed", () => {
  const bundle = findRedocBundle()!;
  let app: FastifyInstance;
  let base = '';

  beforeAll(async () => {
    app = Fastify();
    await app.register(docsRoutes, { openApi: () => ({ openapi: '3.1.0' }), redoc: bundle });
    base = await app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(() => app.close());

  const cases = [
    { accept: 'gzip, deflate, br, zstd', encoding: 'br', decode: brotliDecompressSync },
    { accept: 'gzip;q=1.0, br;q=0.5', encoding: 'br', decode: brotliDecompressSync },
    { accept: 'gzip, deflate', encoding: 'gzip', decode: gunzipSync },
    { accept: 'br;q=0, gzip', encoding: 'gzip', decode: gunzipSync },
    { accept: 'identity', encoding: undefined, decode: (b: Buffer) => b },
    { accept: '', encoding: undefined, decode: (b: Buffer) => b },
  ] as const;

  for (const { accept, encoding, decode } of cases)
    it(`Accept-Encoding "${accept}": ${encoding ?? 'identity'}`, async () => {
      const res = await get(`${base}${bundle.url}`, accept ? { 'accept-encoding': accept } : {});
      expect(res.status).toBe(200);
      expect(res.headers['content-encoding']).toBe(encoding);
      expect(res.headers.vary).toBe('Accept-Encoding');
      expect(res.headers['content-type']).toBe('text/javascript; charset=utf-8');
      expect(Number(res.headers['content-length'])).toBe(res.body.length);
      expect(decode(res.body).equals(bundle.script)).toBe(true);
      if (encoding) expect(res.body.length).toBeLessThan(bundle.script.length / 3);
      expect(res.headers.etag).toBe(encoding ? `"${bundle.hash}-${encoding}"` : `"${bundle.hash}"`);
      // Revalidation: the same form's ETag is a 304 with no body.
      const again = await get(`${base}${bundle.url}`, {
        ...(accept ? { 'accept-encoding': accept } : {}),
        'if-none-match': res.headers.etag as string,
      });
      expect(again.status).toBe(304);
      expect(again.body.length).toBe(0);
    });

  it('a form the client does not accept is never sent for its ETag', async () => {
    const br = await get(`${base}${bundle.url}`, { 'accept-encoding': 'br' });
    const plain = await get(`${base}${bundle.url}`, { 'if-none-match': br.headers.etag as string });
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
  });

  it('the script that starts Redoc too', async () => {
    const res = await get(`${base}${INIT_SCRIPT_URL}`, { 'accept-encoding': 'gzip' });
    expect(res.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(res.body).equals(INIT_SCRIPT)).toBe(true);
  });

  it('negotiates as RFC 9110 says', () => {
    expect(chooseEncoding(undefined)).toBeNull();
    expect(chooseEncoding('*')).toBe('br');
    expect(chooseEncoding('*;q=0')).toBeNull();
    expect(chooseEncoding('x-gzip')).toBe('gzip');
    expect(chooseEncoding('BR')).toBe('br');
    expect(chooseEncoding('br;q=0, gzip;q=0')).toBeNull();
  });
});
