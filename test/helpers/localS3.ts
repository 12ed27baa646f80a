import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import S3rver from 's3rver';

/** s3rver's built-in account. */
const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/**
 * A local S3-compatible server (s3rver) on 127.0.0.1 over a temporary directory: no network, no
 * mock of the SDK. It can be stopped and started again on the same port (an outage), and lets
 * tests look at what the bucket holds, including multipart uploads in progress.
 */
export class LocalS3 {
  private server: S3rver | null = null;
  /** Multipart uploads someone tried to abort (s3rver cannot abort them, real S3 would). */
  private readonly aborted = new Set<string>();
  /** A client of the server, to look at buckets and plant objects. */
  client!: S3Client;

  private constructor(
    readonly directory: string,
    private port: number,
  ) {}

  /** Starts a server on a free port. */
  static async start(): Promise<LocalS3> {
    const s3 = new LocalS3(mkdtempSync(path.join(tmpdir(), 'orgdata-s3-')), 0);
    await s3.resume();
    s3.client = new S3Client({ region: 'us-east-1', endpoint: s3.endpoint, forcePathStyle: true, credentials: CREDENTIALS });
    return s3;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts the server (again), on the same port and over the same directory. */
  async resume(): Promise<void> {
    if (this.server) return;
    const server = new S3rver({ address: '127.0.0.1', port: this.port, directory: this.directory, silent: true });
    const address = await server.run();
    this.port = address.port;
    server.httpServer.on('request', (request: { method?: string; url?: string }) => {
      const uploadId = new URL(request.url ?? '/', 'http://s3').searchParams.get('uploadId');
      if (request.method === 'DELETE' && uploadId) this.aborted.add(uploadId);
    });
    this.server = server;
  }

  /** Stops the server: every request to it fails to connect until `resume`. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    const closed = server.close();
    server.httpServer.closeAllConnections();
    await closed;
  }

  async close(): Promise<void> {
    await this.stop();
    this.client.destroy();
    rmSync(this.directory, { recursive: true, force: true });
  }

  /** A new, empty bucket, and the environment of an orgdata instance storing its files there. */
  async newBucket(env: Record<string, string> = {}): Promise<{ bucket: string; env: Record<string, string> }> {
    const bucket = `orgdata-${randomBytes(6).toString('hex')}`;
    await this.client.send(new CreateBucketCommand({ Bucket: bucket }));
    return {
      bucket,
      env: {
        BLOB_STORE: 's3',
        S3_BUCKET: bucket,
        S3_ENDPOINT: this.endpoint,
        S3_FORCE_PATH_STYLE: 'true',
        S3_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
        S3_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
        ...env,
      },
    };
  }

  /** The keys of every object in the bucket, sorted. */
  async keys(bucket: string): Promise<string[]> {
    const keys: string[] = [];
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: bucket, ContinuationToken: token }));
      keys.push(...(page.Contents ?? []).map((object) => object.Key!));
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
    return keys.sort();
  }

  /** Multipart uploads into the bucket neither completed nor aborted, with the bytes of their parts. */
  openUploads(bucket: string): { id: string; bytes: number }[] {
    const dir = path.join(this.directory, bucket, '._S3rver_uploads');
    if (!existsSync(dir)) return [];
    return readdirSync(dir)
      .filter((id) => !this.aborted.has(id))
      .map((id) => ({
        id,
        bytes: readdirSync(path.join(dir, id))
          .filter((name) => /^\d+$/.test(name))
          .reduce((sum, name) => sum + statSync(path.join(dir, id, name)).size, 0),
      }));
  }

  /** Makes an object look last modified at `date` (s3rver serves its file's mtime). */
  age(bucket: string, key: string, date: Date): void {
    const parts = key.split('/');
    const file = path.join(this.directory, bucket, ...parts.slice(0, -1), `${parts.at(-1)}._S3rver_object`);
    utimesSync(file, date, date);
  }
}
