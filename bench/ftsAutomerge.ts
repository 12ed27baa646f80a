/**
 * FTS5's `automerge` (bench/README.md, "Create, 37d48eb against now"): migration 014's search table
 * alone (contentless, detail=none, prefixes 1–6), rows of three words and an organisation's term
 * inserted one transaction each as creates write them, then prefix searches (first 25 matches and
 * all of them). Count each phase's instructions under callgrind, in a file of its own per setting:
 *
 *   for A in 4 8 16; do npx tsx bench/ftsAutomerge.ts $A 20000 insert; done     (build the files)
 *   valgrind --tool=callgrind --callgrind-out-file=/dev/null node --import tsx bench/ftsAutomerge.ts 8 20000 query
 *   valgrind … bench/ftsAutomerge.ts 8 20000 insert                              (the inserts alone)
 *
 * Arguments: automerge, rows, phase (insert | query | both), prefix lengths ('1 2 3 4 5 6', as
 * migration 014; '1 2 3 4' to see what fewer cost). Times printed are wall clock, for a
 * quiet machine only; valgrind's "I refs" total is the figure.
 */
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import SQLite from 'better-sqlite3';
const N = Number(process.argv[3] ?? 100000),
  A = Number(process.argv[2]);
const words = [
  'john',
  'mary',
  'smith',
  'jones',
  'taylor',
  'brown',
  'williams',
  'wilson',
  'johnson',
  'davies',
  'robinson',
  'wright',
  'thompson',
  'evans',
  'walker',
  'white',
  'roberts',
  'green',
  'hall',
  'wood',
  'jackson',
  'clarke',
];
const MODE = process.argv[4] ?? 'both';
const PREFIXES = process.argv[5] ?? '1 2 3 4 5 6';
const file = path.join(tmpdir(), `orgdata-fts-automerge-${A}-${PREFIXES.replaceAll(' ', '')}.sqlite`);
if (MODE !== 'query') {
  rmSync(file, { force: true });
  rmSync(file + '-wal', { force: true });
}
const db = new SQLite(file);
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
if (MODE !== 'query')
  db.exec(
    `create virtual table f using fts5(terms, content='', columnsize=0, detail=none, prefix='${PREFIXES}', tokenize='unicode61 remove_diacritics 2')`,
  );
if (MODE !== 'query') db.exec(`insert into f(f, rank) values ('automerge', ${A})`);
const ins = db.prepare('insert into f(rowid, terms) values (?, ?)');
let seed = 1;
const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
const t0 = process.hrtime.bigint();
for (let i = 1; i <= (MODE === 'query' ? 0 : N); i++) {
  const w = () => words[Math.floor(rnd() * words.length)]! + (rnd() < 0.5 ? Math.floor(rnd() * 1000) : '');
  ins.run(i, `${w()} ${w()} ${w()}@example.com o0123abcd`);
}
const insertUs = Number(process.hrtime.bigint() - t0) / N / 1000;
const q = db.prepare<[string], { n: number }>('select count(*) n from (select rowid from f where f match ? limit 25)');
const qc = db.prepare<[string], { n: number }>('select count(*) n from f where f match ?');
const out: string[] = [];
if (MODE === 'insert') {
  console.log('inserted');
  process.exit(0);
}
for (const term of ['j*', 'jo*', 'smith*', 'o0123abcd AND wil*', 'tayl* AND w*', 'wright42*', 'johns*', 'thomps*']) {
  for (let i = 0; i < 20; i++) qc.get(term);
  const t = process.hrtime.bigint();
  for (let i = 0; i < 200; i++) q.get(term);
  const first = Number(process.hrtime.bigint() - t) / 200 / 1000;
  const t2 = process.hrtime.bigint();
  for (let i = 0; i < 20; i++) qc.get(term);
  const count = Number(process.hrtime.bigint() - t2) / 20 / 1000;
  out.push(`${term}: 25 ${first.toFixed(0)} µs, all ${count.toFixed(0)} µs`);
}
const structure = db.prepare<[], { n: number }>(`select count(*) n from f_data`).get()!.n;
console.log(
  `automerge ${A}, prefixes ${PREFIXES}, ${N} rows: insert ${insertUs.toFixed(1)} µs/row, ${structure} data rows; ${out.join('; ')}`,
);
