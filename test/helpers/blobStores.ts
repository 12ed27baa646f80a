import { existsSync, mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { STAGING_PREFIX } from '../../src/infra/blobs/s3BlobStore.js';
import { makeHarness, type Dialect, type Harness, type HarnessOptions } from './harness.js';
import type { LocalS3 } from './localS3.js';

export type StoreKind = 'local' | 's3';
/** Every file suite runs against both blob stores: DATA_DIR/files and an S3 bucket (s3rver). */
export const STORES: StoreKind[] = ['local', 's3'];

/** What a test can see of a harness's blob store, whichever it is. */
export interface StoreProbe {
  /** Keys of the stored blobs, sorted. */
  blobs(): Promise<string[]>;
  /** What unfinished uploads left: partial files, staging objects, multipart uploads still open. */
  leftovers(): Promise<string[]>;
  /** Bytes the uploads in flight have handed to the store so far. */
  receivedBytes(): Promise<number>;
  /** Leaves what an upload interrupted by a crash at `date` would leave. */
  plantLeftover(name: string, date: Date): Promise<void>;
}

/** Every regular file under `dir` (relative paths), e.g. blobs and `.part` leftovers. */
export function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return (readdirSync(dir, { recursive: true }) as string[]).filter((name) => statSync(path.join(dir, name)).isFile()).sort();
}

function localProbe(filesDir: string): StoreProbe {
  const tmp = path.join(filesDir, 'tmp');
  return {
    blobs: async () => filesUnder(path.join(filesDir, 'blobs')),
    leftovers: async () => filesUnder(tmp),
    receivedBytes: async () => filesUnder(tmp).reduce((sum, name) => sum + statSync(path.join(tmp, name)).size, 0),
    async plantLeftover(name, date) {
      mkdirSync(tmp, { recursive: true });
      writeFileSync(path.join(tmp, `${name}.part`), 'x');
      utimesSync(path.join(tmp, `${name}.part`), date, date);
    },
  };
}

function s3Probe(s3: LocalS3, bucket: string): StoreProbe {
  return {
    blobs: async () => (await s3.keys(bucket)).filter((key) => !key.startsWith(STAGING_PREFIX)),
    leftovers: async () => [
      ...(await s3.keys(bucket)).filter((key) => key.startsWith(STAGING_PREFIX)),
      ...s3.openUploads(bucket).map((upload) => `multipart upload ${upload.id}`),
    ],
    receivedBytes: async () => s3.openUploads(bucket).reduce((sum, upload) => sum + upload.bytes, 0),
    async plantLeftover(name, date) {
      const key = `${STAGING_PREFIX}${name}`;
      await s3.client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: 'x' }));
      s3.age(bucket, key, date);
    },
  };
}

/** A harness whose files go to `store` (for s3: a new bucket of `s3`), and a probe of that store. */
export async function storeHarness(
  dialect: Dialect,
  store: StoreKind,
  s3: LocalS3,
  options: HarnessOptions = {},
): Promise<{ h: Harness; probe: StoreProbe }> {
  if (store === 'local') {
    const h = await makeHarness(dialect, options);
    return { h, probe: localProbe(path.join(h.config.dataDir, 'files')) };
  }
  const { bucket, env } = await s3.newBucket();
  const h = await makeHarness(dialect, { ...options, env: { ...options.env, ...env } });
  return { h, probe: s3Probe(s3, bucket) };
}
