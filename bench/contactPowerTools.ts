/**
 * The cost of the dashboard contacts list's power tools (issue 20, item 5) on one large
 * organisation: the bounded count of each filter, a previous page deep in the list, and bulk
 * actions on 10,000 contacts (the bound). Seeded straight into the database as `bench:scale` does;
 * SQLite, or PostgreSQL with BENCH_DATABASE_URL.
 *
 *   BENCH_SCALE_CONTACTS=1000000 npx tsx bench/contactPowerTools.ts
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npx tsx bench/contactPowerTools.ts
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { bulkAddLabel, bulkAddToGroup, bulkDelete } from '../src/domain/contacts/bulk.js';
import { countContacts, type ListedFilters } from '../src/domain/contacts/count.js';
import { listContacts, reversedSort } from '../src/domain/contacts/list.js';
import type { Ctx } from '../src/domain/context.js';
import { createOrg } from '../src/domain/orgs/orgs.js';
import { postgresWriter, seed, sqliteWriter } from './scale/seed.js';

const CONTACTS = Number(process.env.BENCH_SCALE_CONTACTS ?? 1_000_000);

async function timed<T>(work: () => Promise<T>, runs = 5): Promise<{ ms: number; result: T }> {
  const times: number[] = [];
  let result!: T;
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    result = await work();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  return { ms: Math.round(times[Math.floor(times.length / 2)]! * 100) / 100, result };
}

/** PostgreSQL (a schema of its own, dropped after) when set, else SQLite in a temporary directory. */
const DATABASE_URL = process.env.BENCH_DATABASE_URL ?? null;

async function main(): Promise<void> {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-power-'));
  const schema = `bench_power_${Date.now()}`;
  const admin = DATABASE_URL ? new pg.Client({ connectionString: DATABASE_URL }) : null;
  try {
    if (admin) {
      await admin.connect();
      await admin.query(`create schema ${schema}`);
    }
    const open = () => openDatabase({ databaseUrl: DATABASE_URL, dataDir, ...(DATABASE_URL ? { pgSchema: schema } : {}) });
    const db = open();
    await migrateToLatest(db);
    const { org, user } = await createOrg(db.kysely, {
      name: 'Big',
      adminEmail: 'big@example.com',
      adminPassword: 'correct horse battery',
    });
    await db.close();
    const started = performance.now();
    const writer = DATABASE_URL
      ? postgresWriter(`${DATABASE_URL}?options=${encodeURIComponent(`-c search_path=${schema}`)}`)
      : sqliteWriter(path.join(dataDir, 'orgdata.sqlite'));
    const seeded = await seed(writer, org.id, CONTACTS, Math.floor(CONTACTS * 0.9));
    if (DATABASE_URL) await writer.exec('vacuum analyze');
    await writer.close();
    console.log(`${CONTACTS} contacts seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const reopened = open();
    const ctx = (): Ctx => ({
      db: reopened.kysely,
      orgId: org.id,
      actor: { kind: 'user', userId: user.id, role: 'admin' },
      requestId: 'bench',
      now: new Date(),
    });
    const [customer, , , unused] = seeded.labelIds;
    const cases: [string, ListedFilters][] = [
      ['no filter', {}],
      ['label on a third', { labelId: customer }],
      ['unused label', { labelId: unused }],
      ['word in every contact (first)', { words: ['first'] }],
      ['word in one contact (first 12345)', { words: ['first', '12345'] }],
      ['long word in every contact (contact)', { words: ['contact'] }],
      ['word in every contact + label (first, label)', { words: ['first'], labelId: customer }],
      ['rare word + label on a third (first 12345, label)', { words: ['first', '12345'], labelId: customer }],
    ];
    const rows = [];
    for (const [name, filters] of cases) {
      const { ms, result } = await timed(() => countContacts(ctx(), filters));
      rows.push({ count: name, 'median ms': ms, result: result.more ? `${result.count}+` : String(result.count) });
    }
    console.table(rows);

    // Previous page from 90 % deep, each order: one page read backwards.
    const deep = (await listContacts(ctx(), { limit: 1, after: seeded.deepRow }, {}, 'created_at')).first!;
    const back = await timed(() => listContacts(ctx(), { limit: 25, after: deep }, {}, reversedSort('created_at')));
    const backLabel = await timed(() => listContacts(ctx(), { limit: 25, after: deep }, { labelId: customer }, reversedSort('created_at')));
    console.table([
      { 'previous page, 90 % deep': 'no filter', 'median ms': back.ms, rows: back.result.items.length },
      { 'previous page, 90 % deep': 'label', 'median ms': backLabel.ms, rows: backLabel.result.items.length },
    ]);

    // Bulk actions on the bound: 10,000 contacts, one transaction each, one event per contact.
    const ids = (await listContacts(ctx(), { limit: 10_000, after: null }, {}, 'created_at')).items.map((c) => c.id);
    const once = async <T>(work: () => Promise<T>) => timed(work, 1);
    const label = await once(() => bulkAddLabel(ctx(), { ids }, unused!));
    const group = await once(() => bulkAddToGroup(ctx(), { filters: { words: ['first', '1234'] } }, seeded.groupId));
    const gone = await once(() => bulkDelete(ctx(), { ids }));
    console.table([
      { bulk: 'add label, 10,000 ids', ms: Math.round(label.ms), changed: label.result.changed },
      { bulk: 'add to group, all matching "first 1234"', ms: Math.round(group.ms), changed: group.result.changed },
      { bulk: 'delete, 10,000 ids', ms: Math.round(gone.ms), changed: gone.result.changed },
    ]);
    await reopened.close();
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
    if (admin) {
      await admin.query(`drop schema ${schema} cascade`);
      await admin.end();
    }
  }
}

await main();
