/**
 * What each part of a request costs, measured: the budget's targets (bench/budget.ts) run on builds
 * of this checkout with one part switched off each, beside the build as it is, at the same time on
 * the same machine. A part's cost is the instructions of the build as served less those of the
 * build without it. This is how create's distance from its floor is accounted for, part by part
 * (issue 46; bench/README.md, "Each part switched off").
 *
 *   npx tsx bench/ablate.ts                       every ablation below, create and batch-upsert
 *   npx tsx bench/ablate.ts rate-limits key-guard  some of them
 *   BENCH_TARGETS=create …                         some targets (budget.ts's names)
 *   BENCH_JOBS=2 (default)                         builds measured side by side
 *
 * The parts are bench/ablations.ts's. A source ablation is a copy of src/ with exact
 * replacements (each must match exactly once, so a change of the code fails the tool, and
 * test/benchAblations.test.ts, rather than measuring nothing), built into a directory of its own
 * under bench/.tmp/ablate/ (node_modules linked), and measured there through BENCH_CHECKOUT.
 * Settings and the Idempotency-Key are switched through BENCH_ENV and BENCH_IDEMPOTENCY on the
 * build as it is. Nothing here is ever measured into budget.json.
 *
 * Each ablated build still answers every request of the targets correctly (the same status and
 * body): what is switched off is work the targets' requests never need, though other requests do
 * (a refused body, a revoked key, a webhook endpoint, a client over its limit).
 */
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { ABLATIONS, type Ablation } from './ablations.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const TMP = path.join(import.meta.dirname, '.tmp', 'ablate');
const JOBS = Number(process.env.BENCH_JOBS ?? 2);
const TARGETS = process.env.BENCH_TARGETS ?? 'create,batch-upsert';

interface Result {
  name: string;
  what: string;
  /** Instructions per unit by target. */
  figures: Record<string, number>;
}

/** A build of this checkout with the replacements made, in a directory of its own. */
function ablatedBuild(ablation: Ablation): string {
  const dir = path.join(TMP, ablation.name);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  for (const entry of ['src', 'scripts', 'package.json', 'tsconfig.json', 'tsconfig.build.json']) {
    if (existsSync(path.join(ROOT, entry))) cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true });
  }
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  for (const { file, find, replace } of ablation.replacements ?? []) {
    const target = path.join(dir, file);
    const text = readFileSync(target, 'utf8');
    const count = text.split(find).length - 1;
    if (count !== 1)
      throw new Error(`${ablation.name}: ${file} holds ${JSON.stringify(find)} ${count} times, not once: update bench/ablate.ts`);
    writeFileSync(target, text.replace(find, replace));
  }
  execFileSync('npm', ['run', '-s', 'build'], { cwd: dir, stdio: ['ignore', 'inherit', 'inherit'] });
  return dir;
}

/** bench/budget.ts on `checkout` with `env`, its figures read back from the file it writes (never budget.json). */
async function measured(label: string, checkout: string, env: Record<string, string>): Promise<Record<string, number>> {
  const file = path.join(TMP, `${label}.json`);
  rmSync(file, { force: true });
  await new Promise<void>((resolve, reject) => {
    const child = spawn('npx', ['tsx', 'bench/budget.ts', '--update'], {
      cwd: ROOT,
      env: { ...process.env, ...env, BENCH_TARGETS: TARGETS, BENCH_JOBS: '1', BENCH_CHECKOUT: checkout, BENCH_BUDGET_FILE: file },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const prefix = (chunk: Buffer) => chunk.toString().replace(/^(?=.)/gm, `[${label}] `);
    child.stdout.on('data', (chunk: Buffer) => process.stderr.write(prefix(chunk)));
    child.stderr.on('data', (chunk: Buffer) => process.stderr.write(prefix(chunk)));
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${label}: bench/budget.ts exited ${code}`))));
  });
  const written = JSON.parse(readFileSync(file, 'utf8')) as { targets: Record<string, { instructions: number }> };
  return Object.fromEntries(Object.entries(written.targets).map(([name, t]) => [name, t.instructions]));
}

async function main(): Promise<void> {
  const names = process.argv.slice(2);
  const chosen = names.length === 0 ? ABLATIONS : ABLATIONS.filter((a) => names.includes(a.name));
  const unknown = names.filter((n) => !ABLATIONS.some((a) => a.name === n));
  if (unknown.length > 0) throw new Error(`no ablation named ${unknown.join(', ')}; there are ${ABLATIONS.map((a) => a.name).join(', ')}`);
  mkdirSync(TMP, { recursive: true });
  const began = performance.now();
  const builds = chosen.map((a) => ({ ablation: a, dir: a.replacements ? ablatedBuild(a) : ROOT }));
  const results: Result[] = [];
  const queue = [{ ablation: { name: 'as-served', what: '' } as Ablation, dir: ROOT }, ...builds];
  await Promise.all(
    Array.from({ length: Math.min(JOBS, queue.length) }, async () => {
      for (let next = queue.shift(); next; next = queue.shift()) {
        const figures = await measured(next.ablation.name, next.dir, next.ablation.env ?? {});
        results.push({ name: next.ablation.name, what: next.ablation.what, figures });
      }
    }),
  );
  const asServed = results.find((r) => r.name === 'as-served')!.figures;
  const fmt = (n: number) => Math.round(n).toLocaleString('en-GB');
  const commit = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', 'HEAD'], { encoding: 'utf8' }).trim();
  console.log(
    `\nEach part switched off (${commit}, ${((performance.now() - began) / 60_000).toFixed(1)} min; instructions per unit, median of the windows)`,
  );
  for (const target of TARGETS.split(',')) {
    console.log(`\n${target}: as served ${fmt(asServed[target]!)}`);
    for (const name of ABLATIONS.map((a) => a.name)) {
      const result = results.find((r) => r.name === name);
      if (!result) continue;
      const without = result.figures[target]!;
      console.log(`  ${fmt(asServed[target]! - without).padStart(9)}  ${name.padEnd(16)} (without it ${fmt(without)}): ${result.what}`);
    }
  }
}

await main();
