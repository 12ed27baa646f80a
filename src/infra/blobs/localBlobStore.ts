import { randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BlobStore, StagedBlob } from '../../domain/files/blobStore.js';
import { borrow, UploadMeter } from './meter.js';

/**
 * Blobs as files under a directory. A write goes to `tmp/<random>.part` and is flushed to disk;
 * its commit renames it into place: a rename within one file system is atomic, so a reader never
 * sees half a file and a crash leaves only a `.part` file that `sweep` removes.
 */
export class LocalBlobStore implements BlobStore {
  private readonly tmpDir: string;

  constructor(private readonly root: string) {
    this.tmpDir = path.join(root, 'tmp');
  }

  private pathOf(key: string): string {
    // Keys are made by the server ([A-Za-z0-9_/]); refuse anything that could climb out of root.
    if (!/^[A-Za-z0-9_]+(\/[A-Za-z0-9_]+)*$/.test(key)) throw new Error(`invalid blob key ${key}`);
    return path.join(this.root, 'blobs', key);
  }

  async stage(key: string, source: Readable, expectedBytes: number): Promise<StagedBlob> {
    const target = this.pathOf(key);
    await mkdir(this.tmpDir, { recursive: true });
    const tmp = path.join(this.tmpDir, `${randomBytes(12).toString('hex')}.part`);
    const meter = new UploadMeter(expectedBytes);
    const { input, release } = borrow(source);
    const output = createWriteStream(tmp, { flags: 'wx' });
    try {
      await pipeline(input, meter, output);
      const handle = await open(tmp, 'r+');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
    } catch (error) {
      // pipeline() rejects on the first error, possibly before the file stream has even opened
      // its file: removing the file before the stream closed could leave a stray `.part` behind.
      if (!output.closed) await new Promise<void>((resolve) => output.once('close', () => resolve()));
      await rm(tmp, { force: true });
      throw error;
    } finally {
      release();
    }
    return {
      size: meter.received,
      sha256: meter.sha256(),
      async commit() {
        await mkdir(path.dirname(target), { recursive: true });
        await rename(tmp, target);
      },
      async discard() {
        await rm(tmp, { force: true }).catch(() => undefined);
      },
    };
  }

  async get(key: string): Promise<{ stream: Readable; size: number } | null> {
    const file = this.pathOf(key);
    try {
      const { size } = await stat(file);
      return { stream: createReadStream(file), size };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    await rm(this.pathOf(key), { force: true });
  }

  /** Local bytes are only served through orgdata's own download links. */
  directDownloadUrl(): Promise<string | null> {
    return Promise.resolve(null);
  }

  async hasBlobs(): Promise<boolean> {
    const names = await readdir(path.join(this.root, 'blobs'), { recursive: true, withFileTypes: true }).catch(() => []);
    return names.some((entry) => entry.isFile());
  }

  async sweep(olderThan: Date): Promise<number> {
    let removed = 0;
    let names: string[];
    try {
      names = await readdir(this.tmpDir);
    } catch {
      return 0;
    }
    for (const name of names) {
      const file = path.join(this.tmpDir, name);
      const info = await stat(file).catch(() => null);
      if (info && info.mtime < olderThan) {
        await rm(file, { force: true });
        removed++;
      }
    }
    return removed;
  }
}
