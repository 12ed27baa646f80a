import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import type { ExportManifest } from '../src/cli/exchange/format.js';
import { cliResult, errorCode, sha256 } from './helpers/exchange.js';
import { orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';

// Issue 19, item 2: what `orgdata export` reads of a SQLite installation: one snapshot while the
// server writes, and nothing silently left behind. (The move itself: exchange.test.ts.)
describe('orgdata export of a running SQLite installation', { timeout: 300_000 }, () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-export-'));
    dirs.push(dir);
    return dir;
  };
  const envs: ServerEnv[] = [];
  afterAll(async () => {
    for (const env of envs) await env.dispose();
    for (const dir of [...dirs, ...envs.map((e) => e.env.DATA_DIR)]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('exports one snapshot while the server writes, and the export imports whole', async () => {
    const busy = await serverEnv('sqlite');
    envs.push(busy);
    const { key } = await orgWithKey(busy.env);
    const server = await startServerProcess(busy);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const label = (await (
      await fetch(`${busy.url}/api/v1/contacts/labels`, { method: 'POST', headers, body: JSON.stringify({ name: 'Busy' }) })
    ).json()) as { id: string };
    let writing = true;
    let written = 0;
    const writer = (async () => {
      for (let n = 0; writing; n++) {
        const body = JSON.stringify({
          first_name: 'Busy',
          email: `busy${n}@example.com`,
          label_ids: [label.id],
          metadata: { n: String(n) },
        });
        const res = await fetch(`${busy.url}/api/v1/contacts`, { method: 'POST', headers, body });
        expect(res.status).toBe(201);
        written++;
      }
    })();
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const dir = path.join(tempDir(), 'busy');
      const result = await cliResult(busy.env, ['export', '--to', dir]);
      expect(result.code, JSON.stringify(result.json)).toBe(0);
      await new Promise((resolve) => setTimeout(resolve, 300));
      writing = false;
      await writer;
      const manifest = result.json as unknown as ExportManifest;
      const contacts = manifest.tables.contacts!.rows;
      expect(contacts).toBeGreaterThan(0);
      expect(contacts).toBeLessThan(written);
      // One instant: every contact with its label link, its metadata and its event, none without.
      expect(manifest.tables.contact_labels!.rows).toBe(contacts);
      expect(manifest.tables.contact_metadata!.rows).toBe(contacts);
      expect(manifest.tables.events!.rows).toBe(contacts + 1);
      const into = { ...busy.env, DATA_DIR: path.join(tempDir(), 'busy-target') };
      const imported = await cliResult(into, ['import', '--from', dir]);
      expect(imported.code, JSON.stringify(imported.json)).toBe(0);
    } finally {
      writing = false;
      await writer.catch(() => undefined);
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('stops on bytes missing for a file that exists, and on a table it does not know, rather than leave them behind', async () => {
    const odd = await serverEnv('sqlite');
    envs.push(odd);
    const { orgId } = await orgWithKey(odd.env);
    const db = new SQLite(path.join(odd.env.DATA_DIR!, 'orgdata.sqlite'));
    const now = new Date().toISOString();
    db.prepare(
      `insert into files (id, org_id, name, content_type, size, status, sha256, storage_key, upload_expires_at, created_at, updated_at, uploaded_at)
       values ('file_lost', ?, 'lost.txt', 'text/plain', 4, 'ready', ?, ?, ?, ?, ?, ?)`,
    ).run(orgId, sha256('lost'), `${orgId}/file_lost`, now, now, now, now);
    const lost = await cliResult(odd.env, ['export', '--to', path.join(tempDir(), 'lost')]);
    expect(errorCode(lost)).toBe('export_failed');
    expect(JSON.stringify(lost.json)).toContain('file_lost');

    db.prepare(`delete from files where id = 'file_lost'`).run();
    db.exec('create table surprise (id text primary key)');
    db.close();
    const result = await cliResult(odd.env, ['export', '--to', path.join(tempDir(), 'odd')]);
    expect(errorCode(result)).toBe('unknown_table');
    expect(JSON.stringify(result.json)).toContain('surprise');
  });
});
