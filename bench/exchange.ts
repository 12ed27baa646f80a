/**
 * `npm run bench:exchange`: the time and peak memory of `orgdata export` on SQLite and of
 * `orgdata import` into PostgreSQL (the move of issue 19), at BENCH_CONTACTS contacts (default
 * 100,000) seeded in bulk as `npm run bench:scale` seeds them (labels, metadata, a group, events,
 * files, and 200 small organisations beside). Each command runs as the built CLI (`npm start`'s
 * code) in a process of its own, which reports its peak RSS (getrusage's ru_maxrss) as it exits.
 * Needs TEST_DATABASE_URL.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { ExportManifest } from '../src/cli/exchange/format.js';
import { orgWithKey, serverEnv } from '../test/helpers/serverProcess.js';
import { seed, sqliteWriter } from './scale/seed.js';

const run = promisify(execFile);
const CONTACTS = Number(process.env.BENCH_CONTACTS ?? 100_000);
const BUILT_CLI = path.resolve(import.meta.dirname, '../dist/cli.js');
/** Prints the process's peak resident memory as it exits, whatever the command. */
const PEAK_RSS = 'data:text/javascript,process.on("exit",()=>process.stderr.write("peak_rss_kb="+process.resourceUsage().maxRSS+"\\n"))';

async function timed(env: Record<string, string>, args: string[]): Promise<{ seconds: number; peakMb: number; json: unknown }> {
  const started = performance.now();
  const { stdout, stderr } = await run(process.execPath, ['--import', PEAK_RSS, BUILT_CLI, ...args, '--json'], {
    env,
    maxBuffer: 512 * 1024 * 1024,
  });
  const seconds = (performance.now() - started) / 1000;
  const peakKb = Number(/peak_rss_kb=(\d+)/.exec(stderr)?.[1] ?? NaN);
  return { seconds, peakMb: Math.round(peakKb / 1024), json: JSON.parse(stdout) as unknown };
}

async function main(): Promise<void> {
  if (!process.env.TEST_DATABASE_URL) throw new Error('set TEST_DATABASE_URL (a PostgreSQL server to import into)');
  const source = await serverEnv('sqlite', { LOG_LEVEL: 'error' });
  const target = await serverEnv('postgres', { LOG_LEVEL: 'error' });
  const dir = path.join(mkdtempSync(path.join(tmpdir(), 'orgdata-bench-exchange-')), 'export');
  try {
    const { orgId } = await orgWithKey(source.env);
    let started = performance.now();
    const writer = sqliteWriter(path.join(source.env.DATA_DIR!, 'orgdata.sqlite'));
    await seed(writer, orgId, CONTACTS, Math.floor(CONTACTS * 0.9));
    await writer.close();
    console.log(`seeded ${CONTACTS} contacts in ${((performance.now() - started) / 1000).toFixed(1)} s`);

    const exported = await timed(source.env, ['export', '--to', dir]);
    const manifest = exported.json as ExportManifest;
    const rows = Object.values(manifest.tables).reduce((sum, table) => sum + table.rows, 0);
    const bytes = Object.values(manifest.tables).reduce((sum, table) => sum + table.bytes, 0);
    started = performance.now();
    const imported = await timed(target.env, ['import', '--from', dir]);
    const summary = (imported.json as { imported: { rows: number } }).imported;
    if (summary.rows !== rows) throw new Error(`imported ${summary.rows} rows of ${rows}`);
    const contacts = manifest.tables.contacts!.rows;
    console.table([
      {
        step: 'export (SQLite)',
        contacts,
        rows,
        'MB written': Math.round(bytes / 1024 / 1024),
        s: exported.seconds.toFixed(1),
        'peak RSS MB': exported.peakMb,
      },
      { step: 'import (PostgreSQL)', contacts, rows, 'MB written': '', s: imported.seconds.toFixed(1), 'peak RSS MB': imported.peakMb },
    ]);
    console.log(`rows/s: export ${Math.round(rows / exported.seconds)}, import ${Math.round(rows / imported.seconds)}`);
  } finally {
    rmSync(path.dirname(dir), { recursive: true, force: true });
    rmSync(source.env.DATA_DIR!, { recursive: true, force: true });
    await target.dispose();
    rmSync(target.env.DATA_DIR!, { recursive: true, force: true });
  }
}

await main();
