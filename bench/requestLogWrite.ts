/**
 * The request log's write cost, in process: CPU time per logged row of writeRequests (the batch
 * writer of http/requestLog.ts: one multi-row INSERT and one usage upsert per 200 rows) on a
 * SQLite file, as the server writes it. A loop of thousands of batches on one core is far steadier
 * than the end-to-end bench on a shared machine; compare the figure with list-25's CPU per request.
 *
 *   npx tsx bench/requestLogWrite.ts          (BENCH_BATCHES, default 2000 batches of 200)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { migrateToLatest, openDatabase } from '../src/db/database.js';
import { writeRequests, type LoggedRequest } from '../src/domain/requests/requestLog.js';
import { newRequestId } from '../src/http/problem.js';

const BATCHES = Number(process.env.BENCH_BATCHES ?? 2000);
const dir = mkdtempSync(join(tmpdir(), 'orgdata-logbench-'));
const db = openDatabase({ databaseUrl: null, dataDir: dir });
await migrateToLatest(db);
const orgId = 'org_bench000000000000000000';
await db.kysely
  .insertInto('orgs')
  .values({ id: orgId, name: 'bench', created_at: new Date().toISOString() } as never)
  .execute();

let n = 0;
const rowOf = (): LoggedRequest => ({
  // Random, as the server's are: each row's primary key lands at a random place in its index.
  request_id: newRequestId(),
  org_id: orgId,
  key_id: `key_${n++ % 3}`,
  at: new Date().toISOString(),
  method: 'GET',
  route: '/api/v1/contacts',
  status: 200,
  error_code: null,
  duration_ms: 1.25,
  origin: '127.0.0.1 (undici)',
});

async function run(batches: number): Promise<number> {
  const before = process.cpuUsage();
  for (let b = 0; b < batches; b++) await writeRequests(db.kysely, Array.from({ length: 200 }, rowOf));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / (batches * 200);
}

await run(200); // warm-up
const rounds = [];
for (let r = 0; r < 5; r++) rounds.push(await run(BATCHES / 5));
rounds.sort((a, b) => a - b);
console.log(
  `writeRequests: CPU µs per logged row over ${BATCHES} batches of 200: median ${rounds[2]!.toFixed(2)} (rounds ${rounds.map((r) => r.toFixed(2)).join(', ')})`,
);
await db.close();
rmSync(dir, { recursive: true, force: true });
