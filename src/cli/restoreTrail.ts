import { constants } from 'node:fs';
import { chmod, copyFile, mkdir, rm, rmdir } from 'node:fs/promises';
import path from 'node:path';

/**
 * What `orgdata restore` wrote, to take back when it fails: the files it made and the folders it
 * created, and nothing else. DATA_DIR may be a folder the operator made (a mount point, with its
 * owner and permissions set for the server) or may hold files of theirs: those stay. A folder is
 * removed only when restore created it and it is empty once restore's own files are gone.
 */
export class RestoreTrail {
  private readonly files: string[] = [];
  private readonly folders: string[] = [];

  /** mkdir -p, remembering each folder it created (not those that were there). */
  async folder(dir: string): Promise<void> {
    const target = path.resolve(dir);
    const first = await mkdir(target, { recursive: true });
    if (first === undefined) return;
    const created: string[] = [];
    for (let at = target; ; at = path.dirname(at)) {
      created.unshift(at);
      if (at === path.resolve(first) || at === path.dirname(at)) break;
    }
    this.folders.push(...created);
  }

  /** A file restore is about to write (it was checked not to be there before). */
  file(file: string): string {
    this.files.push(path.resolve(file));
    return file;
  }

  /** Copies a file to a path nothing is at (never over one), remembering it. */
  async copy(from: string, to: string): Promise<void> {
    try {
      await copyFile(from, to, constants.COPYFILE_EXCL);
      // copyFile gives the copy its source's mode: a backup made before files were private is 0644.
      await chmod(to, 0o600);
    } catch (error) {
      // Something is there already: not restore's to remove.
      if ((error as { code?: string }).code !== 'EEXIST') this.file(to);
      throw error;
    }
    this.file(to);
  }

  /** Removes what restore wrote: its files, then its folders deepest first, each only while empty. */
  async undo(): Promise<void> {
    for (const file of [...this.files].reverse()) await rm(file, { force: true });
    for (const folder of [...this.folders].reverse()) {
      // Not empty: something not restore's is in it, which stays (and so does the folder).
      await rmdir(folder).catch(() => undefined);
    }
  }
}
