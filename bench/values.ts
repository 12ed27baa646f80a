/**
 * Batch-upsert's values, counted (issue 46): what the floor (bench/floor.ts) replays ready-made and
 * a batch must make from its request, made by the built app's own functions in a loop with no
 * database, server or checks (bench/valuesLoop.ts), stage by stage. `npx tsx bench/values.ts`
 * (after `npm run build`; VALUES_DIST=DIR another build), about 3 minutes.
 *
 * Each stage's figure is the loop's instructions under callgrind with the stages up to it, less
 * the loop with the stages before it, for BATCHES_LONG − BATCHES_SHORT batches (two runs each, the
 * difference: start-up, module loading and the contacts made beforehand cancel out), a contact
 * (100 a batch). The loop's first BATCHES_SHORT batches warm it: every function a contact calls is
 * past V8's top tier by then (10,000 calls), as in bench:check's windows.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import { countedRun } from './callgrind.js';

const TMP = path.join(import.meta.dirname, '.tmp', 'values');
const BATCHES_SHORT = 200;
const BATCHES_LONG = 500;
const CONTACTS = 100;

/** What each stage adds (bench/valuesLoop.ts's numbered steps). */
const STAGES = [
  'the items with their stored emails, the batch keys, the plan (found or new)',
  "new contacts' ids, time and rows (trimmed names, lower-cased email, search text); updates' changed columns and their json_each payload",
  "each contact's view (the answer's and the event's), an update's previous attributes",
  "each contact's JSON (the response serializer's, once for event and answer), each event's id, text and row",
  "the answer's text",
];

function count(stages: number, batches: number, dir: string): Promise<number> {
  const loop = [path.join(import.meta.dirname, 'valuesLoop.ts'), String(stages), String(batches), String(BATCHES_LONG)];
  return countedRun(path.join(dir, `s${stages}-b${batches}.out`), ['--import', 'tsx', ...loop], process.env, ['--smc-check=all-non-file']);
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-GB');
mkdirSync(TMP, { recursive: true });
const dir = mkdtempSync(path.join(TMP, 'run-'));
try {
  const perContact: number[] = [];
  for (let stages = 0; stages <= STAGES.length; stages++) {
    const [short, long] = await Promise.all([count(stages, BATCHES_SHORT, dir), count(stages, BATCHES_LONG, dir)]);
    perContact.push((long - short) / ((BATCHES_LONG - BATCHES_SHORT) * CONTACTS));
  }
  console.log(
    `batch-upsert's values, made by the built app's functions, instructions a contact (batches ${BATCHES_SHORT}–${BATCHES_LONG}):`,
  );
  console.log(`  ${fmt(perContact[0]!).padStart(7)}  the loop and the request bodies (not counted below)`);
  for (let s = 1; s <= STAGES.length; s++) console.log(`  ${fmt(perContact[s]! - perContact[s - 1]!).padStart(7)}  ${STAGES[s - 1]}`);
  console.log(`  ${fmt(perContact[STAGES.length]! - perContact[0]!).padStart(7)}  in all`);
} finally {
  if (process.env.BENCH_KEEP !== '1') rmSync(dir, { recursive: true, force: true });
}
