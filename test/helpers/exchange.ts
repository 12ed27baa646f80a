import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'vitest';
import { cliEntry } from './cliEntry.js';

const run = promisify(execFile);
const CLI = cliEntry(path.resolve(import.meta.dirname, '../..'));

/** The operator CLI as a process: its exit code and its --json answer (or error). */
export async function cliResult(env: Record<string, string>, args: string[]): Promise<{ code: number; json: Record<string, unknown> }> {
  try {
    const { stdout } = await run(process.execPath, [...CLI, ...args, '--json'], { env, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, json: JSON.parse(stdout) as Record<string, unknown> };
  } catch (error) {
    const { code, stdout, stderr } = error as { code: number; stdout: string; stderr: string };
    try {
      return { code, json: JSON.parse(stdout) as Record<string, unknown> };
    } catch {
      throw new Error(`the CLI failed without a JSON answer (exit ${code}):\n${stdout}\n${stderr}`);
    }
  }
}

/** The CLI's error code of a failed command, after checking it did fail. */
export function errorCode(result: { code: number; json: Record<string, unknown> }): string {
  expect(result.code, JSON.stringify(result.json)).not.toBe(0);
  return (result.json.error as { code: string }).code;
}

export const sha256 = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

/** The rows of an export's table, each with its keys sorted, sorted by their JSON: comparable across databases. */
export function exportedRows(dir: string, table: string): string[] {
  const text = readFileSync(path.join(dir, 'tables', `${table}.jsonl`), 'utf8');
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const row = JSON.parse(line) as Record<string, unknown>;
      return JSON.stringify(Object.fromEntries(Object.entries(row).sort(([a], [b]) => a.localeCompare(b))));
    })
    .sort();
}

/** Every regular file under `dir`, with its text (for searching an export for what must not be in it). */
export function everyFile(dir: string): { name: string; text: string }[] {
  return (readdirSync(dir, { recursive: true, withFileTypes: true }) as import('node:fs').Dirent[])
    .filter((entry) => entry.isFile())
    .map((entry) => {
      const file = path.join(entry.parentPath, entry.name);
      return { name: path.relative(dir, file), text: readFileSync(file, 'latin1') };
    });
}

/** Every page of a list, following next_cursor. */
export async function listAll(base: string, key: string, query = ''): Promise<Record<string, unknown>[]> {
  const all: Record<string, unknown>[] = [];
  for (let cursor: string | null = null; ;) {
    const res = await fetch(`${base}/api/v1/contacts?limit=100${query}${cursor ? `&cursor=${cursor}` : ''}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(res.status, await res.clone().text()).toBe(200);
    const page = (await res.json()) as { data: Record<string, unknown>[]; next_cursor: string | null };
    all.push(...page.data);
    if (!(cursor = page.next_cursor)) return all;
  }
}

/**
 * A copy of an export with one table file edited, its manifest entry (bytes, sha256) made to
 * match: damage the checksums cannot catch, as an edit by hand or by a script would be.
 */
export function editedExport(from: string, to: string, table: string, edit: (lines: string[]) => string[]): void {
  cpSync(from, to, { recursive: true });
  const file = path.join(to, 'tables', `${table}.jsonl`);
  const text = edit(readFileSync(file, 'utf8').split('\n').filter(Boolean)).join('\n') + '\n';
  writeFileSync(file, text);
  const manifestFile = path.join(to, 'manifest.json');
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as { tables: Record<string, { bytes: number; sha256: string }> };
  manifest.tables[table] = { ...manifest.tables[table]!, bytes: Buffer.byteLength(text), sha256: sha256(text) };
  writeFileSync(manifestFile, JSON.stringify(manifest, null, 2));
}
