/**
 * A request's instructions by the JavaScript function that spent them (bench/attribution.ts), from
 * kept dumps: `BENCH_KEEP=1 BENCH_FUNCTIONS=1` with bench/budget.ts keeps them in
 * bench/.tmp/budget/<target>-XXX with the server's perf.map. Issue 46.
 *
 * `npx tsx bench/byFunction.ts DIR UNITS [FILE…]`: the dumps FILE (default callgrind.out.2 … .6,
 * bench:check's five windows) of DIR, divided by UNITS (the units they hold together: five windows
 * of 10 batches of 100 contacts, 5000; of create's 400 requests, 2000). Prints the totals by
 * kind, the functions, the JavaScript by file; BY_FUNCTION_ROWS=N rows (120), BY_FUNCTION_DETAIL=RE
 * where the instructions of each function matching RE were spent, BY_FUNCTION_JSON=F every
 * function's figure to F, BY_FUNCTION_GROUPS=1 the functions by what they are for (GROUPS below:
 * the first that matches; what none matches is listed, so nothing hides in a remainder).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { attributeFiles, kindOf, total, type Kind } from './attribution.js';

const [dir, unitsText, ...given] = process.argv.slice(2);
if (!dir || !unitsText) throw new Error('usage: npx tsx bench/byFunction.ts DIR UNITS [FILE…]');
const units = Number(unitsText);
const files = (given.length > 0 ? given : [2, 3, 4, 5, 6].map((n) => `callgrind.out.${n}`)).map((file) => path.join(dir, file));
const held = attributeFiles(files, path.join(dir, 'perf.map'));

const fmt = (n: number) => Math.round(n).toLocaleString('en-GB');
const rows = [...held].map(([name, spent]) => [name, total(spent) / units] as const).sort((a, b) => b[1] - a[1]);
const sum = (kind: Kind) => rows.filter(([name]) => kindOf(name) === kind).reduce((s, [, cost]) => s + cost, 0);
console.log(
  `${files.length} dumps of ${dir}, a unit of ${fmt(units)}: ${fmt(rows.reduce((s, [, cost]) => s + cost, 0))} instructions a unit`,
);
console.log(`  JavaScript with the builtins it called ${fmt(sum('js'))}, SQLite and better-sqlite3's native code ${fmt(sum('sqlite'))},`);
console.log(
  `  the garbage collector ${fmt(sum('gc'))}, V8's compilers ${fmt(sum('compiler'))}, left without a JavaScript caller ${fmt(sum('other'))}`,
);
console.log('\nby function (a unit):');
for (const [name, cost] of rows.slice(0, Number(process.env.BY_FUNCTION_ROWS ?? 120))) {
  if (cost < 1) break;
  console.log(`  ${fmt(cost).padStart(8)}  ${kindOf(name).padEnd(8)} ${name.slice(0, 140)}`);
}
const byFile = new Map<string, number>();
for (const [name, cost] of rows) {
  if (kindOf(name) !== 'js') continue;
  const where = name.split(' ').slice(1).join(' ').replace(/:\d+$/, '') || '(new Function)';
  byFile.set(where, (byFile.get(where) ?? 0) + cost);
}
console.log('\nJavaScript by file (a unit):');
for (const [file, cost] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 40)) console.log(`  ${fmt(cost).padStart(8)}  ${file}`);
if (process.env.BY_FUNCTION_DETAIL) {
  const pattern = new RegExp(process.env.BY_FUNCTION_DETAIL);
  for (const [name, spent] of held) {
    if (!pattern.test(name) || total(spent) / units < 1) continue;
    console.log(`\n${name}: ${fmt(total(spent) / units)} a unit, spent in`);
    for (const [where, cost] of [...spent].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
      if (cost / units >= 1) console.log(`  ${fmt(cost / units).padStart(8)}  ${where.slice(0, 140)}`);
    }
  }
}
/**
 * What a batch-upsert's (or a create's) functions are for, by name: the parts bench/README.md's
 * account of issue 46 names. JavaScript keeps what it called (bench/attribution.ts), so each
 * part holds its builtins too; code TurboFan inlined is its caller's.
 */
const GROUPS: [string, RegExp][] = [
  ['SQLite and the binding of values (better-sqlite3 native)', /\[linux-x64\.node\]$/],
  ["V8's compilers (left out of bench:check's figures)", /CompileLazy|InstructionStream::Relocate|ZoneVector/],
  ['the garbage collector (young generation)', /^$/],
  ["idempotency: the body's canonical JSON, its SHA-256, the claim and the stored answer", /idempotency|hashDigest|canonicalJson/],
  [
    'the request log, metrics, the key, rate limits, timers',
    /requestLog|requestSeries|metrics|prom-client|pino|authenticate|apiKeys|rateLimit|bodyTimeout|pipelining|routeOf|sendTimeout|tokenBucket|scopes\.js/,
  ],
  ['strict JSON: repeated and __proto__ keys refused', /dist\/domain\/json\.js|jsonBody/],
  [
    "prepare: each item's stored email (NFC, the domain's IDNA form), the batch's own duplicates",
    /'?prepare dist\/domain\/contacts\/batch\.js/,
  ],
  ["each item checked against ContactCreate's schema (Ajv) and answered on its own", /^'?validate\d+ |ucs2length|batchItems|ajv/],
  [
    "the contacts' JSON (once, for the events and the answer) and the answer",
    /^'?anonymous\d+ |fast-json-stringify|batchAnswer|SerializedAnswer|routes\/contacts/,
  ],
  ["the events: each one's id, row and data", /events\/record\.js/],
  ["the field checks: lengths, characters, the email's form", /validation\.js|contactFieldErrors|metadataFieldErrors|metadata\.js/],
  [
    'the values: ids, times, rows, stored email, search text, changed columns, views',
    /contactChange|searchText|newContactRow|ids\.js|'?written dist\/domain\/contacts\/patch|contacts\/view\.js|withNormalEmail|updateRows|contacts\/input\.js/,
  ],
  [
    "the batch's plan and writes: the holders' and matches' maps, insert order, taken rows, outcomes, statements bound",
    /contacts\/batch|contacts\/patch|contacts\/contacts|dist\/db\/|kysely|better-sqlite3|^' $/,
  ],
  [
    'HTTP, Fastify, the body parsed, Node (the bare server does these too)',
    /fastify|find-my-way|node:|JsonParse|Libuv|uv_|toad-cache|http\/context|requestEdge/,
  ],
];
if (process.env.BY_FUNCTION_GROUPS === '1') {
  const sums = new Map<string, number>();
  const unmatched: (readonly [string, number])[] = [];
  for (const row of rows) {
    const [name, cost] = row;
    const kind = kindOf(name);
    const group =
      kind === 'sqlite'
        ? GROUPS[0]![0]
        : kind === 'compiler'
          ? GROUPS[1]![0]
          : kind === 'gc'
            ? GROUPS[2]![0]
            : GROUPS.find(([, re]) => re.test(name))?.[0];
    if (group) sums.set(group, (sums.get(group) ?? 0) + cost);
    else if (cost > 0) unmatched.push(row);
  }
  console.log('\nby what it is for (a unit):');
  for (const [group] of GROUPS) console.log(`  ${fmt(sums.get(group) ?? 0).padStart(8)}  ${group}`);
  const rest = unmatched.reduce((sum, [, cost]) => sum + cost, 0);
  console.log(`  ${fmt(rest).padStart(8)}  none of these (below)`);
  for (const [name, cost] of unmatched.slice(0, 15)) console.log(`    ${fmt(cost).padStart(6)}  ${name.slice(0, 120)}`);
}
if (process.env.BY_FUNCTION_JSON) writeFileSync(process.env.BY_FUNCTION_JSON, JSON.stringify(Object.fromEntries(rows)));
