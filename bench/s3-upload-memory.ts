/**
 * Memory of orgdata while one large upload streams through PUT /uploads/{token} into the blob
 * store: a real server (startServer) in this process, s3rver in a child process (its buffers do
 * not count), the body made 64 KiB at a time as it is sent. Prints, above the idle baseline, the
 * peaks of rss and arrayBuffers sampled every 10 ms (garbage not yet collected included), and the
 * peak of what is really held: arrayBuffers after a full collection, every 4 MiB sent.
 *
 *   npx tsx bench/s3-upload-memory.ts
 *   BENCH_UPLOAD_MIB=100 BENCH_STORE=local npx tsx bench/s3-upload-memory.ts   (the local store, to compare)
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import { loadConfig } from '../src/config/load.js';
import { createApiKey } from '../src/domain/apiKeys/apiKeys.js';
import { createOrg } from '../src/domain/orgs/orgs.js';
import { startServer } from '../src/server.js';
import { freePort } from '../test/helpers/serverProcess.js';

const MiB = 1024 * 1024;
const SIZE = Number(process.env.BENCH_UPLOAD_MIB ?? 100) * MiB;
const STORE = process.env.BENCH_STORE ?? 's3';
const BUCKET = 'orgdata-bench';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** s3rver in a child process over a temporary directory, once it listens. */
async function startS3rver(directory: string, port: number) {
  const bin = path.join(path.dirname(createRequire(import.meta.url).resolve('s3rver/package.json')), 'bin', 's3rver.js');
  const child = spawn(process.execPath, [bin, '-d', directory, '-a', '127.0.0.1', '-p', String(port), '-s', '--configure-bucket', BUCKET], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('listening') && resolve());
    child.once('exit', (code) => reject(new Error(`s3rver exited with ${code}`)));
  });
  return child;
}

/** Runs a full collection, including the backing stores V8 frees on the next turn. */
async function collect(): Promise<void> {
  gc();
  await nextTurn();
  gc();
}

/**
 * PUTs SIZE bytes of random data made as they are sent, calling `every4MiB` as it goes; resolves
 * with the status, the answer and the sent bytes' hash.
 */
function upload(url: string, every4MiB: () => Promise<void>): Promise<{ status: number; body: string; sha256: string }> {
  const hash = createHash('sha256');
  const pattern = randomBytes(64 * 1024);
  async function* body() {
    for (let sent = 0; sent < SIZE; sent += pattern.length) {
      if (sent % (4 * MiB) === 0) await every4MiB();
      const chunk = Buffer.from(pattern);
      chunk.writeUInt32BE(sent / pattern.length); // every chunk differs
      hash.update(chunk);
      yield chunk;
    }
  }
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'PUT', headers: { 'content-length': SIZE } }, (response) => {
      let text = '';
      response.on('data', (c: Buffer) => (text += c.toString()));
      response.on('end', () => resolve({ status: response.statusCode!, body: text, sha256: hash.digest('hex') }));
    });
    request.on('error', reject);
    Readable.from(body()).pipe(request);
  });
}

const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-bench-'));
const s3Dir = mkdtempSync(path.join(tmpdir(), 'orgdata-bench-s3-'));
const s3Port = await freePort();
const s3rver = STORE === 's3' ? await startS3rver(s3Dir, s3Port) : null;
const config = loadConfig({
  DATA_DIR: dataDir,
  SECRET_KEY: 'bench-secret-key-that-is-at-least-32-characters',
  PORT: '0',
  LOG_LEVEL: 'silent',
  MAX_FILE_BYTES: String(SIZE),
  BLOB_STORE: STORE,
  S3_BUCKET: BUCKET,
  S3_ENDPOINT: `http://127.0.0.1:${s3Port}`,
  S3_FORCE_PATH_STYLE: 'true',
  S3_ACCESS_KEY_ID: 'S3RVER',
  S3_SECRET_ACCESS_KEY: 'S3RVER',
});
const server = await startServer(config);
try {
  const { org, user } = await createOrg(server.db.kysely, {
    name: 'Bench',
    adminEmail: 'bench@example.com',
    adminPassword: 'correct horse battery',
  });
  const { key } = await createApiKey({ db: server.db.kysely, orgId: org.id, userId: user.id, now: new Date() }, config.secretKey, {
    name: 'bench',
    scopes: ['files:write'],
  });
  const reserved = await fetch(`${server.url}/api/v1/files`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'big.bin', content_type: 'application/octet-stream', size: SIZE }),
  });
  const { upload_url } = (await reserved.json()) as { upload_url: string };

  await collect();
  const baseline = process.memoryUsage();
  let peakHeld = baseline.arrayBuffers;
  let peakRss = baseline.rss;
  let peakArrayBuffers = baseline.arrayBuffers;
  const sampler = setInterval(() => {
    const { rss, arrayBuffers } = process.memoryUsage();
    peakRss = Math.max(peakRss, rss);
    peakArrayBuffers = Math.max(peakArrayBuffers, arrayBuffers);
  }, 10);
  const started = performance.now();
  const result = await upload(`${server.url}${new URL(upload_url).pathname}`, async () => {
    await collect();
    peakHeld = Math.max(peakHeld, process.memoryUsage().arrayBuffers);
  });
  const seconds = (performance.now() - started) / 1000; // includes the collections
  clearInterval(sampler);

  const file = JSON.parse(result.body) as { status: string; sha256: string };
  const round = (bytes: number) => Math.round((bytes / MiB) * 10) / 10;
  console.log(
    JSON.stringify(
      {
        store: STORE,
        upload_mib: SIZE / MiB,
        status: result.status,
        sha256_matches: file.sha256 === result.sha256,
        seconds: Math.round(seconds * 100) / 100,
        baseline_rss_mib: round(baseline.rss),
        peak_rss_above_baseline_mib: round(peakRss - baseline.rss),
        peak_array_buffers_above_baseline_mib: round(peakArrayBuffers - baseline.arrayBuffers),
        peak_held_array_buffers_above_baseline_mib: round(peakHeld - baseline.arrayBuffers),
      },
      null,
      2,
    ),
  );
} finally {
  await server.close();
  s3rver?.kill();
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(s3Dir, { recursive: true, force: true });
}
