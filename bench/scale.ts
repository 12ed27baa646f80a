/**
 * `npm run bench:scale`: orgdata with a million contacts in one organisation. Seeds the database in
 * bulk (not through the API), starts a real server process, then measures with autocannon the
 * first page, a page 90 % deep (its cursor made from the row at that position, signed as
 * http/lists.ts signs it), the email filter, get-by-id, the server's memory, and one client
 * walking every contact 100 at a time. Prints the plan of every list query the API runs.
 *
 *   npm run bench:scale
 *   BENCH_SCALE_CONTACTS=100000 BENCH_SETUPS=sqlite npm run bench:scale
 *   BENCH_SCALE_PLANS_ONLY=1 BENCH_SETUPS=postgres npm run bench:scale   (seed, print the plans, stop)
 */
import path from 'node:path';
import { readFileSync } from 'node:fs';
import autocannon from 'autocannon';
import { encodeCursor } from '../src/domain/pagination.js';
import { SECRET } from '../test/helpers/harness.js';
import { orgWithKey, serverEnv, startServerProcess } from '../test/helpers/serverProcess.js';
import { explainLists } from './scale/plans.js';
import { postgresWriter, seed, sqliteWriter, type BulkWriter } from './scale/seed.js';
import { fetchSignIn, sessionCookieFrom } from '../test/helpers/signInForm.js';

const CONTACTS = Number(process.env.BENCH_SCALE_CONTACTS ?? 1_000_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 20);
const SETUPS = (process.env.BENCH_SETUPS ?? ['sqlite', process.env.TEST_DATABASE_URL ? 'postgres' : ''].filter(Boolean).join(','))
  .split(',')
  .filter((s): s is 'sqlite' | 'postgres' => s === 'sqlite' || s === 'postgres');
const DEEP = Math.floor(CONTACTS * 0.9);
/** Seed and print the plans, measure nothing. */
const PLANS_ONLY = process.env.BENCH_SCALE_PLANS_ONLY === '1';

function memoryOf(pid: number): { rssMb: number; peakMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMb: Math.round(kb('VmRSS') / 1024), peakMb: Math.round(kb('VmHWM') / 1024) };
}

const pick = <T>(values: T[]): T => values[Math.floor(Math.random() * values.length)]!;

async function measure(name: string, pid: number, options: autocannon.Options) {
  await autocannon({ connections: CONNECTIONS, duration: 1, ...options });
  const result = await autocannon({ connections: CONNECTIONS, duration: SECONDS, ...options });
  return {
    target: name,
    'req/s': Math.round(result.requests.average),
    'p50 ms': result.latency.p50,
    'p99 ms': result.latency.p99,
    failed: result.non2xx + result.errors + result.timeouts,
    'RSS MB': memoryOf(pid).rssMb,
  };
}

async function runSetup(dialect: 'sqlite' | 'postgres'): Promise<void> {
  const env = await serverEnv(dialect, { LOG_LEVEL: 'error' });
  try {
    const admin = await orgWithKey(env.env); // also applies the migrations
    const { orgId, key } = admin;
    const target = dialect === 'sqlite' ? path.join(env.env.DATA_DIR!, 'orgdata.sqlite') : env.env.DATABASE_URL!;
    const writer: BulkWriter = dialect === 'sqlite' ? sqliteWriter(target) : postgresWriter(target);
    let started = performance.now();
    const seeded = await seed(writer, orgId, CONTACTS, DEEP);
    // PostgreSQL's autovacuum would soon analyse the new rows and mark their pages all-visible
    // (index-only scans need that); SQLite never analyses by itself.
    if (dialect === 'postgres') await writer.exec('vacuum analyze');
    await writer.close();
    console.log(`\n== ${dialect}: ${CONTACTS} contacts seeded in ${((performance.now() - started) / 1000).toFixed(1)} s`);

    const plans = await explainLists(dialect, target, orgId, seeded);
    for (const plan of plans) {
      const notes = [...plan.failures.map((f) => `FAILS: ${f}`), ...plan.flags];
      console.log(`\n-- ${plan.name}${notes.length > 0 ? '   <-- ' + notes.join('; ') : ''}\n${plan.sql}`);
      for (const line of plan.plan) console.log(`   ${line}`);
    }
    // The plans are checked: a case whose required index does not drive it fails the bench.
    const failed = plans.filter((plan) => plan.failures.length > 0);
    console.log(
      `\nplans: ${plans.length} statements, ${failed.length} without their required index${failed.map((p) => `\n  FAILS ${p.name}: ${p.failures.join('; ')}`).join('')}`,
    );
    if (failed.length > 0) process.exitCode = 1;

    if (PLANS_ONLY) return;
    const proc = await startServerProcess(env, { built: true });
    const pid = proc.child.pid!;
    const auth = { authorization: `Bearer ${key}` };
    const api = `${env.url}/api/v1/contacts`;
    try {
      // The binding http/lists.ts signs a contacts cursor with: org, route, no path ids, no filters.
      const cursor = encodeCursor(SECRET, JSON.stringify([orgId, '/api/v1/contacts', {}, {}]), seeded.deepRow);
      const deep = (await (await fetch(`${api}?limit=25&cursor=${cursor}`, { headers: auth })).json()) as { data?: { id: string }[] };
      const first = (await (await fetch(`${api}?limit=1`, { headers: auth })).json()) as { data: { id: string }[] };
      if (!deep.data || deep.data.length !== 25) throw new Error(`the deep cursor was refused: ${JSON.stringify(deep)}`);
      console.log(`\ndeep page starts ${deep.data[0]!.id} (row ${DEEP + 1}); first page starts ${first.data[0]!.id}`);

      const rows = [
        await measure('list first page (25)', pid, { url: `${api}?limit=25`, headers: auth }),
        await measure(`list page ${DEEP} deep (25)`, pid, { url: `${api}?limit=25&cursor=${cursor}`, headers: auth }),
        await measure('list email= (random)', pid, {
          url: env.url,
          requests: [
            {
              method: 'GET',
              setupRequest: (r) => ({ ...r, path: `/api/v1/contacts?email=${pick(seeded.sampleEmails)}`, headers: auth }),
            },
          ],
        }),
        await measure('list label_id= (25)', pid, { url: `${api}?limit=25&label_id=${seeded.labelIds[0]}`, headers: auth }),
        await measure('list label_id= unused label', pid, { url: `${api}?limit=25&label_id=${seeded.labelIds[3]}`, headers: auth }),
        // Sync (issue 18): each within 2x the first page is the target.
        await measure('list q= rare word (first 12345)', pid, { url: `${api}?limit=25&q=first%2012345`, headers: auth }),
        await measure('list q= common word (first)', pid, { url: `${api}?limit=25&q=first`, headers: auth }),
        await measure('list updated_after= recent', pid, {
          url: `${api}?limit=25&updated_after=${encodeURIComponent(seeded.deepRow.createdAt)}`,
          headers: auth,
        }),
        await measure('list metadata[tier]=t7', pid, { url: `${api}?limit=25&metadata%5Btier%5D=t7`, headers: auth }),
        await measure('list sort=-updated_at', pid, { url: `${api}?limit=25&sort=-updated_at`, headers: auth }),
        await measure('get-by-id (random)', pid, {
          url: env.url,
          requests: [{ method: 'GET', setupRequest: (r) => ({ ...r, path: `/api/v1/contacts/${pick(seeded.sampleIds)}`, headers: auth }) }],
        }),
      ];
      console.log(`\n${dialect}, ${CONTACTS} contacts, ${CONNECTIONS} connections, 1 s warm-up + ${SECONDS} s each`);
      console.table(rows);

      started = performance.now();
      let walked = 0;
      let next: string | null = null;
      do {
        const res = await fetch(`${api}?limit=100${next ? `&cursor=${next}` : ''}`, { headers: auth });
        if (!res.ok) throw new Error(`walk failed at ${walked}: ${res.status} ${await res.text()}`);
        const body = (await res.json()) as { data: unknown[]; next_cursor: string | null };
        walked += body.data.length;
        next = body.next_cursor;
      } while (next);
      const seconds = (performance.now() - started) / 1000;
      if (walked !== CONTACTS) throw new Error(`the walk saw ${walked} contacts, not ${CONTACTS}`);
      const memory = memoryOf(pid);
      console.log(
        `walk of ${walked} contacts, limit=100, one client: ${seconds.toFixed(1)} s (${Math.round(walked / 100 / seconds)} pages/s); ` +
          `server RSS now ${memory.rssMb} MB, peak ${memory.peakMb} MB`,
      );

      // The dashboard's CSV export of every contact, streamed: its time and the server's memory.
      const login = await fetchSignIn(env.url, { email: admin.email, password: admin.password });
      const cookie = sessionCookieFrom(login)!;
      started = performance.now();
      const csv = await fetch(`${env.url}/contacts/export.csv`, { headers: { cookie } });
      if (csv.status !== 200) throw new Error(`the export answered ${csv.status}`);
      let bytes = 0;
      let lines = 0;
      for await (const chunk of csv.body as unknown as AsyncIterable<Uint8Array>) {
        bytes += chunk.length;
        for (const byte of chunk) if (byte === 10) lines++;
      }
      if (lines !== CONTACTS + 1) throw new Error(`the export had ${lines} lines, not ${CONTACTS + 1}`);
      const exported = memoryOf(pid);
      console.log(
        `CSV export of ${CONTACTS} contacts (dashboard, streamed): ${((performance.now() - started) / 1000).toFixed(1)} s, ` +
          `${Math.round(bytes / 1024 / 1024)} MB; server RSS now ${exported.rssMb} MB, peak ${exported.peakMb} MB`,
      );
    } finally {
      proc.child.kill('SIGTERM');
      await proc.exited;
    }
  } finally {
    await env.dispose();
  }
}

for (const setup of SETUPS) await runSetup(setup);
