import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITS } from '../src/domain/validation.js';
import { cliResult, editedExport, errorCode } from './helpers/exchange.js';
import { orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';

// Issue item 5: `orgdata import` reads and checks every row of an export before it writes one,
// and writes them in one transaction; an export edited after it was made (its checksums
// recomputed) is refused naming the file and line, and the target stays empty. Through the real
// CLI, into SQLite and PostgreSQL.
const DIALECTS = process.env.TEST_DATABASE_URL ? (['sqlite', 'postgres'] as const) : (['sqlite'] as const);

describe('orgdata import of a damaged export', { timeout: 300_000 }, () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-rowchecks-'));
    dirs.push(dir);
    return dir;
  };
  const envs: ServerEnv[] = [];
  let exported: string;

  beforeAll(async () => {
    const source = await serverEnv('sqlite');
    envs.push(source);
    const { key } = await orgWithKey(source.env);
    const server = await startServerProcess(source);
    try {
      for (let i = 0; i < 12; i++) {
        const res = await fetch(`${source.url}/api/v1/contacts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ first_name: `Row${i}`, email: `row${i}@example.com`, notes: 'a note', metadata: { n: String(i) } }),
        });
        expect(res.status, await res.clone().text()).toBe(201);
      }
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
    exported = path.join(tempDir(), 'export');
    const result = await cliResult(source.env, ['export', '--to', exported]);
    expect(result.code, JSON.stringify(result.json)).toBe(0);
  }, 180_000);

  afterAll(async () => {
    for (const env of envs) await env.dispose();
    for (const dir of [...dirs, ...envs.map((e) => e.env.DATA_DIR)]) if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function target(dialect: 'sqlite' | 'postgres'): Promise<ServerEnv> {
    const env = await serverEnv(dialect);
    envs.push(env);
    return env;
  }

  /** Rows of the tables an import fills first and last: all 0 when nothing was written. */
  async function counts(env: ServerEnv): Promise<Record<string, number>> {
    const tables = ['orgs', 'users', 'contacts', 'events'];
    if (env.env.DATABASE_URL) {
      const client = new pg.Client({ connectionString: env.env.DATABASE_URL });
      await client.connect();
      try {
        const found: Record<string, number> = {};
        for (const table of tables)
          found[table] = Number((await client.query<{ n: string }>(`select count(*) as n from ${table}`)).rows[0]!.n);
        return found;
      } finally {
        await client.end();
      }
    }
    const db = new SQLite(path.join(env.env.DATA_DIR!, 'orgdata.sqlite'), { readonly: true });
    try {
      return Object.fromEntries(
        tables.map((table) => [table, (db.prepare(`select count(*) as n from ${table}`).get() as { n: number }).n]),
      );
    } finally {
      db.close();
    }
  }

  const damages: { name: string; table: string; edit: (lines: string[]) => string[]; code: string; message: RegExp }[] = [
    {
      name: 'a cut line',
      table: 'events',
      edit: (lines) => lines.map((line, i) => (i === 4 ? line.slice(0, Math.floor(line.length / 2)) : line)),
      code: 'export_invalid',
      message: /^tables\/events\.jsonl line 5: not valid JSON \(.+\)\. Nothing was written\.$/,
    },
    {
      name: 'a missing column',
      table: 'contacts',
      edit: (lines) =>
        lines.map((line, i) => {
          if (i !== 6) return line;
          const { org_id: _dropped, ...rest } = JSON.parse(line) as Record<string, unknown>;
          return JSON.stringify(rest);
        }),
      code: 'export_invalid',
      message: /^tables\/contacts\.jsonl line 7: column org_id is missing\. Nothing was written\.$/,
    },
    {
      name: 'notes longer than the API accepts',
      table: 'contacts',
      edit: (lines) =>
        lines.map((line, i) => (i === 2 ? JSON.stringify({ ...JSON.parse(line), notes: 'n'.repeat(LIMITS.notes + 1) }) : line)),
      code: 'export_invalid',
      message: new RegExp(`^tables/contacts\\.jsonl line 3: notes must be at most ${LIMITS.notes} characters\\. Nothing was written\\.$`),
    },
    {
      name: 'a number in a text column',
      table: 'contacts',
      edit: (lines) => lines.map((line, i) => (i === 0 ? JSON.stringify({ ...JSON.parse(line), email: 42 }) : line)),
      code: 'export_invalid',
      message: /^tables\/contacts\.jsonl line 1: column email must be a string\. Nothing was written\.$/,
    },
    {
      // Valid row by row; only the database sees that the organisation is not there. The tables
      // before it (orgs, users, …) were written in the same transaction, and are rolled back.
      name: 'a row naming an organisation that is not there',
      table: 'contacts',
      edit: (lines) => lines.map((line, i) => (i === 11 ? JSON.stringify({ ...JSON.parse(line), org_id: 'org_notthere' }) : line)),
      code: 'import_failed',
      message: /^tables\/contacts\.jsonl lines 1–\d+: the target database refused them \(.+\)\. Nothing was written\.$/,
    },
  ];

  for (const dialect of DIALECTS) {
    it(`refuses each damage naming the file and line, and writes nothing into ${dialect}`, async () => {
      const env = await target(dialect);
      for (const damage of damages) {
        const dir = path.join(tempDir(), damage.name.replace(/\W+/g, '-'));
        editedExport(exported, dir, damage.table, damage.edit);
        const result = await cliResult(env.env, ['import', '--from', dir]);
        expect(errorCode(result), `${damage.name}: ${JSON.stringify(result.json)}`).toBe(damage.code);
        expect((result.json.error as { message: string }).message, damage.name).toMatch(damage.message);
        expect(await counts(env), damage.name).toEqual({ orgs: 0, users: 0, contacts: 0, events: 0 });
      }
      // The export as made still imports, whole.
      const imported = await cliResult(env.env, ['import', '--from', exported]);
      expect(imported.code, JSON.stringify(imported.json)).toBe(0);
      expect(await counts(env)).toMatchObject({ orgs: 1, contacts: 12 });
    });
  }
});
