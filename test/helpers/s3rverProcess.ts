import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CreateBucketCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';

const MAIN = path.resolve(import.meta.dirname, 's3rverMain.ts');
const CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

/** s3rver in a child process (see s3rverMain.ts): a bucket store a test can stall and resume. */
export class S3rverProcess {
  readonly client: S3Client;

  private constructor(
    private child: ChildProcess,
    private readonly directory: string,
    readonly endpoint: string,
  ) {
    this.client = new S3Client({ region: 'us-east-1', endpoint, forcePathStyle: true, credentials: CREDENTIALS });
  }

  static async start(): Promise<S3rverProcess> {
    const directory = mkdtempSync(path.join(tmpdir(), 'orgdata-s3p-'));
    const { child, port } = await launch(directory, 0);
    return new S3rverProcess(child, directory, `http://127.0.0.1:${port}`);
  }

  /**
   * Kills the server (stalled or not) and starts a new one on the same port and directory: the
   * requests it held unanswered are lost, as they would be with a store that failed for good.
   */
  async restart(): Promise<void> {
    await this.kill();
    this.child = (await launch(this.directory, Number(new URL(this.endpoint).port))).child;
  }

  /** A new bucket, and the environment of an orgdata instance storing its files there. */
  async newBucket(name: string): Promise<Record<string, string>> {
    await this.client.send(new CreateBucketCommand({ Bucket: name }));
    return {
      BLOB_STORE: 's3',
      S3_BUCKET: name,
      S3_ENDPOINT: this.endpoint,
      S3_FORCE_PATH_STYLE: 'true',
      S3_ACCESS_KEY_ID: CREDENTIALS.accessKeyId,
      S3_SECRET_ACCESS_KEY: CREDENTIALS.secretAccessKey,
    };
  }

  async keys(bucket: string): Promise<string[]> {
    const page = await this.client.send(new ListObjectsV2Command({ Bucket: bucket }));
    return (page.Contents ?? []).map((object) => object.Key!).sort();
  }

  stall(): void {
    this.child.kill('SIGSTOP');
  }

  resume(): void {
    this.child.kill('SIGCONT');
  }

  private async kill(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.child.kill('SIGKILL');
    await exited;
  }

  async stop(): Promise<void> {
    await this.kill();
    this.client.destroy();
    rmSync(this.directory, { recursive: true, force: true });
  }
}

async function launch(directory: string, port: number): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, directory, String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const listening = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`s3rver exited with ${code}`)));
    child.stdout!.once('data', (chunk: Buffer) => resolve(Number(chunk.toString().trim())));
  });
  return { child, port: listening };
}
