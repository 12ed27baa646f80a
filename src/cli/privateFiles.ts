import { chmodSync, lstatSync, readdirSync } from 'node:fs';
import path from 'node:path';

/**
 * Everything orgdata writes holds personal data or secrets: the SQLite database (password and key
 * hashes), its WAL, secret.key, uploaded files, backups and exports. So every process of ours
 * makes its files readable by their owner only (files 0600, folders 0700), whatever umask it was
 * started with: a umask is the one setting that covers every writer, better-sqlite3's and
 * libuv's included, without naming each file. (fs.copyFile keeps its source's mode, so what is
 * copied is made private explicitly: see RestoreTrail.copy.)
 */
export function keepFilesPrivate(): void {
  process.umask(0o077);
}

const OTHERS = 0o077;

/**
 * A DATA_DIR written before files were private (or by a copy that kept looser modes) is made
 * private once: when the folder itself is open to its group or others, every folder and file below
 * it is set to 0700 / 0600. Links are not followed. What cannot be changed (a mount point owned
 * by someone else) is left as it is: the server's own new files are private in any case.
 */
export function makeDataDirPrivate(dataDir: string): void {
  let mode: number;
  try {
    mode = lstatSync(dataDir).mode;
  } catch {
    return; // not made yet: it will be made private
  }
  if ((mode & OTHERS) === 0) return;
  const visit = (at: string) => {
    let stat;
    try {
      stat = lstatSync(at);
    } catch {
      return;
    }
    if (stat.isSymbolicLink()) return;
    const wanted = stat.isDirectory() ? 0o700 : 0o600;
    if ((stat.mode & 0o777) !== wanted) {
      try {
        chmodSync(at, wanted);
      } catch {
        // Not ours to change.
      }
    }
    if (stat.isDirectory()) for (const entry of readdirSync(at)) visit(path.join(at, entry));
  };
  visit(dataDir);
}
