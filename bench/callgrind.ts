/**
 * A built orgdata server under valgrind's callgrind, its machine instructions counted window by
 * window. Shared by `bench/instructions.ts` (what GET /metrics and the request log cost) and
 * `bench/budget.ts` (the instruction budget of each hot request, `npm run bench:check`); the method
 * is explained in instructions.ts's header. In short:
 *
 * - the server runs as `npm start` runs it, plus V8's `--single-threaded --no-memory-reducer` (the
 *   garbage collector and compilers on the main thread: helper threads split the same work
 *   differently from run to run), fixed hash and random seeds (V8 seeds its hash tables at
 *   random; a different seed is a different number of probes), a young generation of fixed size
 *   (V8 resizes it by wall-clock allocation rate, which a loaded machine lowers) and no
 *   allocation-site pretenuring (decided per process, see NODE_FLAGS);
 * - nothing is counted outside a window (`--instr-atstart=no`); a window is between
 *   `callgrind_control -i on; -z` and `-d; -i off`, with a collection of the young generation just
 *   before it (not counted) and one at its end (counted), so that it holds the collection of what it
 *   allocated (a request's garbage dies young; the old generation's major collections are left out
 *   of every figure anyway, see `counted`). Not a full collection (`BENCH_GC=full`, as until
 *   2026-11-28): see EDGE_GC;
 * - a preloaded module stretches setInterval's intervals (the server runs 50–100× slower under
 *   valgrind while timers keep wall-clock time: the request log's batches fill to 200 rows before
 *   its 1 s timer fires, as at full speed).
 *
 * With `names`, V8 writes a perf map (`--perf-basic-prof`, /tmp/perf-<pid>.map) through which
 * the JIT's code, which callgrind knows only by address, is named by its JavaScript function.
 */
import { execFile, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { START_FLAGS, startServerProcess, type ServerEnv, type ServerProcess } from '../test/helpers/serverProcess.js';

const run = promisify(execFile);
const GC_DONE = 'bench-callgrind: gc done';

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
export const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

/** What one window counted. */
export interface Counted {
  instructions: number;
  /** Of which in V8's garbage collector's functions. */
  gc: number;
  /** Of which in V8's compilers' functions. */
  compile: number;
  /**
   * Of which in V8's major garbage collections (mark-compact and the sweeping it leaves, inclusive
   * cost: every collection but the scavenges of the young generation).
   */
  majorGc: number;
  /** Self cost by function (`names` only; compilers left out), see functionName. */
  functions: Map<string, number>;
}

export interface Window extends Counted {
  seconds: number;
  count: number;
}

/**
 * What a window's figure counts: all but V8's compilers and its major garbage collections. A major
 * collection's cost (marking the live heap, sweeping) depends on when V8 runs it and on what it
 * finds, not on the request: the window's forced collection at its end, and the sweeping of the one
 * before it, came out 195 M instructions in one window and 253 M in the next for the same work
 * (list-25, 400 requests). Scavenges (the young generation) are counted.
 */
export const counted = (w: Counted) => w.instructions - w.compile - w.majorGc;

/** V8's garbage collector's functions, by name (self cost). */
const GC_FUNCTION =
  /Marking|MarkCompact|Sweeper|Scaveng|Evacuat|RememberedSet|heap::base::|GCTracer|FreeList|MemoryChunk|MemoryAllocator|ObjectVisitor|Heap::|__popcountdi2/;
/**
 * V8's compilers (TurboFan, Maglev, Sparkplug, bytecode, parser): still at work after thousands of
 * requests (a function now and then reaches TurboFan's threshold: 2 compilations per 600 requests
 * after 6,000, by --trace-opt, authenticateKey's alone 50 ms), a start-up cost that a long-running
 * server pays once, not per request.
 */
export const COMPILER_FUNCTION =
  /v8::internal::(compiler|maglev|baseline|interpreter)::|v8::internal::(Compiler|Zone|Assembler|RelocIterator|Deoptimizer|Parser|ParserBase|PreParser|Scanner|Scope|DeclarationScope|AstNodeFactory|SourcePositionTableBuilder|OptimizedCompilationInfo)\b|CompilationJob|PerfBasicLogger|CodeEventLogger/;

/** A perf map (`--perf-basic-prof`): JIT code's address ranges and their functions. */
export class PerfMap {
  private starts: number[] = [];
  private entries: { start: number; end: number; name: string }[] = [];
  constructor(file: string | null) {
    if (!file || !existsSync(file)) return;
    // A later line for the same address wins: code space is reused once old code is collected.
    const byStart = new Map<number, { start: number; end: number; name: string }>();
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const match = /^([0-9a-f]+) ([0-9a-f]+) (.*)$/.exec(line);
      if (!match) continue;
      const start = parseInt(match[1]!, 16);
      byStart.set(start, { start, end: start + parseInt(match[2]!, 16), name: match[3]! });
    }
    this.entries = [...byStart.values()].sort((a, b) => a.start - b.start);
    this.starts = this.entries.map((entry) => entry.start);
  }
  lookup(address: number): string | null {
    let low = 0;
    let high = this.starts.length - 1;
    while (low <= high) {
      const mid = (low + high) >> 1;
      if (this.starts[mid]! <= address) low = mid + 1;
      else high = mid - 1;
    }
    for (let i = high; i >= 0 && i > high - 8; i--) {
      const entry = this.entries[i]!;
      if (address >= entry.start && address < entry.end) return entry.name;
    }
    return null;
  }
}

/**
 * A function's name the same from run to run and clone to clone: JavaScript by name and file
 * (tiers merged: `~` interpreted, `^` Sparkplug, `+` Maglev, `*` TurboFan; the line kept only for
 * an anonymous function), native code by symbol and library.
 */
export function functionName(file: string, fn: string, object: string, perf: PerfMap): string {
  const bare = fn.replace(/'\d+$/, '');
  if (/^0x[0-9a-f]+$/.test(bare)) {
    const name = perf.lookup(parseInt(bare, 16));
    if (!name) return '(JIT code, unnamed)';
    const js = /^JS:[~^+*]?(\S*) (.*)$/.exec(name);
    if (!js) return name.replace(/^Builtin:/, 'Builtins_');
    // The same name in any checkout (BENCH_CHECKOUT, a clone in /tmp): from dist/ or node_modules/ on.
    const where = js[2]!
      .replace(/^file:\/\//, '')
      .replace(/.*\/node_modules\//, 'node_modules/')
      .replace(/^\/.*?\/(dist|src|bench)\//, '$1/');
    const short = js[1] ? where.replace(/:\d+:\d+$/, '') : where.replace(/:\d+$/, '');
    return `${js[1] || '(anonymous)'} ${short}`;
  }
  const library = path.basename(object === '???' ? file : object);
  return `${bare} [${library}]`;
}

/** Self cost of major collections' own functions (left out of the functions, counted in majorGc). */
const MAJOR_GC_FUNCTION = /MarkCompact|Marking|Sweep|Evacuat|MarkBit|PointersUpdating/;

/**
 * Inclusive cost of major collections: the mark-compact itself, the sweeping it leaves behind,
 * wherever that is done (lazily when JavaScript allocates, or at the start of the next collection),
 * and the incremental marking before it (its starts and steps, whether a step runs as V8's delayed
 * task or on an allocation). The marking was counted until 2026-11-28: with the windows bounded by
 * scavenges the old generation fills until V8 starts a major collection of its own, and a delayed
 * task of its marking (IncrementalMarkingJob, due at a wall-clock time) took 58–101 M instructions
 * in whichever window it fell: the first empty window on a quiet machine, create's counted windows
 * on a loaded one (1,228,215 a request against ~1,080,000).
 */
async function majorGc(file: string): Promise<number> {
  const { stdout } = await run('callgrind_annotate', ['--inclusive=yes', '--threshold=100', file], { maxBuffer: 512 * 1024 * 1024 });
  const inclusive = (fn: string) => {
    const match = new RegExp(`^\\s*([\\d,]+) \\(\\s*[\\d.]+%\\)\\s+\\?\\?\\?:v8::internal::${fn}\\(`, 'm').exec(stdout);
    return match ? Number(match[1]!.replace(/,/g, '')) : 0;
  };
  return (
    inclusive('Heap::MarkCompact') +
    inclusive('Sweeper::RawSweep') +
    inclusive('IncrementalMarking::Start') +
    inclusive('IncrementalMarking::Step')
  );
}

/** Runs callgrind_annotate on a dump: its total, GC and compiler shares, and cost by function. */
async function annotate(file: string, perf: PerfMap | null): Promise<Counted> {
  const { stdout } = await run('callgrind_annotate', ['--threshold=100', file], { maxBuffer: 512 * 1024 * 1024 });
  const total = /^\s*([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS/m.exec(stdout);
  const counted: Counted = {
    instructions: total ? Number(total[1]!.replace(/,/g, '')) : 0,
    gc: 0,
    compile: 0,
    majorGc: await majorGc(file),
    functions: new Map(),
  };
  for (const line of stdout.split('\n')) {
    const match = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*?):(.*) \[(.*)\]$/.exec(line);
    if (!match) continue;
    const cost = Number(match[1]!.replace(/,/g, ''));
    const fn = match[3]!;
    if (COMPILER_FUNCTION.test(fn)) {
      counted.compile += cost;
      continue;
    }
    if (GC_FUNCTION.test(fn)) counted.gc += cost;
    if (perf && !MAJOR_GC_FUNCTION.test(fn)) {
      const name = functionName(match[2]!, fn, match[4]!, perf);
      counted.functions.set(name, (counted.functions.get(name) ?? 0) + cost);
    }
  }
  return counted;
}

/**
 * A Node program run to its end under callgrind, counting all along: its instructions in all (a
 * loop's, counted twice at two lengths by bench/floor.ts, floorWrites.ts and values.ts).
 */
export async function countedRun(out: string, nodeArgs: string[], env: NodeJS.ProcessEnv, valgrindArgs: string[] = []): Promise<number> {
  await run(
    'valgrind',
    ['--tool=callgrind', ...valgrindArgs, `--callgrind-out-file=${out}`, process.execPath, '--single-threaded', ...nodeArgs],
    {
      env,
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  return Number(/^(?:totals|summary): (\d+)/m.exec(readFileSync(out, 'utf8'))![1]);
}

export async function stop(proc: ServerProcess, seconds: number): Promise<void> {
  proc.child.kill('SIGTERM');
  const timer = setTimeout(() => proc.child.kill('SIGKILL'), seconds * 1000);
  await proc.exited;
  clearTimeout(timer);
}

/**
 * The collection at a window's edges: the young generation only (a scavenge), unless `BENCH_GC=full`.
 *
 * A full collection forced at the edges (`gc()`, as until 2026-11-28) deoptimized the request path:
 * V8 holds the objects that optimized code embeds (maps, closures, contexts) weakly, and the first
 * forced mark-compact after the warm-up cleared them and threw away the optimized code of ~180
 * functions ("embedded weak objects cleared" under --trace-deopt: parserOnIncoming, Fastify's
 * handleRequest and hooks, our onRequest, preHandler, handlers, the request log's hook…). The
 * counted windows then ran those functions in V8's baseline tier (Sparkplug: `JS:^` in the perf
 * map, each property load a call to `LoadICBaseline`, ~114,000 instructions a create in window 3
 * alone), and a function called once a request needs 400 calls to reach Maglev and 3,000 to reach
 * TurboFan again, more than a window's 400 requests. A production server does not see this: under
 * load (`npm start`, 60,000 creates from two connections, 5 mark-compacts of V8's own) no code was
 * deoptimized for cleared weak objects after start-up, while a forced `gc()` in the same server,
 * under load or idle, deoptimized 183 code objects at once (bench/README.md, "The windows'
 * collections"). A scavenge never clears what optimized code embeds.
 */
const EDGE_GC = process.env.BENCH_GC === 'full' ? 'gc()' : "gc({ type: 'minor' })";

/** Loaded into the server (--import): a collection (EDGE_GC) on SIGUSR2, intervals stretched. */
function writePreload(dir: string, dilation: number): string {
  const file = path.join(dir, 'preload.mjs');
  writeFileSync(
    file,
    `import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');
const dilation = ${dilation};
const setIntervalAsIs = globalThis.setInterval;
const setTimeoutAsIs = globalThis.setTimeout;
// At most the largest delay Node keeps (a longer one fires after 1 ms instead).
const stretched = (ms) => Math.min((ms ?? 0) * dilation, 0x7fffffff);
globalThis.setInterval = (callback, ms, ...args) => setIntervalAsIs(callback, stretched(ms), ...args);
globalThis.setTimeout = Object.assign((callback, ms, ...args) => setTimeoutAsIs(callback, stretched(ms), ...args), setTimeoutAsIs);
// The collection, then a moment for V8's tasks to finish sweeping what it freed (with
// --single-threaded, sweeping is left to tasks and to allocation: otherwise it lands in the next
// window, or not, at random).
process.on('SIGUSR2', () => {
  ${EDGE_GC};
  setTimeoutAsIs(() => process.stdout.write(${JSON.stringify(GC_DONE + '\n')}), 1000);
});
`,
  );
  return file;
}

/** A built server counted by callgrind, window by window. */
export interface CountedServer {
  proc: ServerProcess;
  /** Counts what the server does while `work` runs, with a collection (EDGE_GC) at either edge. */
  windowed(work: () => Promise<void>): Promise<Window>;
  /**
   * Runs `work` as a window would (a collection at either edge) with counting off: a window
   * whose figure is not wanted (the first after the warm-up, always the highest), at a fraction of
   * a counted window's time (valgrind runs uninstrumented code several times faster, and there is
   * no dump to annotate).
   */
  settle(work: () => Promise<void>): Promise<void>;
  /** Stops the server (and removes its perf map). */
  close(): Promise<void>;
}

/** `npm start`'s semi-space size in MB, V8's default 16 if it sets none. */
const SEMI_SPACE_MB = Number(START_FLAGS.find((flag) => flag.startsWith('--max-semi-space-size='))?.split('=')[1] ?? 16);

const NODE_FLAGS = (names?: boolean) => [
  '--single-threaded',
  // No memory reducer: it collects when allocation per wall-clock second is low, which under
  // valgrind it always is (a major GC in one window and not the next, at random).
  '--no-memory-reducer',
  // The young generation at one size: `npm start`'s largest (`--max-semi-space-size`), which a busy
  // server's reaches. V8 sizes it by allocation per wall-clock millisecond: on a loaded machine,
  // under valgrind, that rate looks low and it shrinks, so a window held several times the
  // scavenges (each walking the roots: IterateObjectCache 34,536 instructions per request instead
  // of 2,391) and events-25 came out 5 % higher than on a quiet machine (bench/README.md).
  `--min-semi-space-size=${SEMI_SPACE_MB}`,
  `--max-semi-space-size=${SEMI_SPACE_MB}`,
  // No allocation-site pretenuring. Whether V8 decides, at some collection, to allocate a site's
  // objects in the old generation is made per process: where it did, those objects die there and,
  // until the next mark-compact, keep alive the young objects they point to, which every scavenge
  // then copies and promotes (1.2 MB a scavenge against 11 KB). get-by-id counted 510,000–546,000
  // a request in such a process and 450,000–494,000 in the next (--trace-gc-nvp's `promoted=`); with
  // this flag, two processes followed the same collections, scavenge for scavenge. At full speed
  // the server promotes 40 KB a scavenge, as here.
  '--no-allocation-site-pretenuring',
  '--hash-seed=20261126',
  '--random-seed=20261126',
  ...(names ? ['--perf-basic-prof'] : []),
  // More V8 flags for an experiment (e.g. --trace-gc --trace-deopt, with BENCH_KEEP=1 the server's
  // output is kept as server.log beside the dumps).
  ...(process.env.BENCH_V8_FLAGS?.split(/\s+/).filter(Boolean) ?? []),
];
const valgrind = (dir: string) => [
  'valgrind',
  '--tool=callgrind',
  '--instr-atstart=no',
  '--smc-check=all-non-file',
  `--callgrind-out-file=${dir}/callgrind.out`,
  '--vgdb=yes',
];

/** The built orgdata server (`npm start`'s flags) under callgrind, counting off until a window. */
export async function startCounted(
  env: ServerEnv,
  dir: string,
  options: { dilation: number; names?: boolean; keepDumps?: boolean },
): Promise<CountedServer> {
  mkdirSync(dir, { recursive: true });
  const preload = writePreload(dir, options.dilation);
  const serverEnv = { ...env, env: { ...env.env, NODE_OPTIONS: `--import=${preload}` } };
  const proc = await startServerProcess(serverEnv, {
    built: true,
    startSeconds: 600,
    nodeFlags: NODE_FLAGS(options.names),
    wrapper: valgrind(dir),
  });
  return counting(proc, dir, serverEnv.env, options);
}

/** Another Node program (bench/bareServer.ts) under callgrind, ready once `url`/ping answers. */
export async function startCountedScript(
  env: Record<string, string>,
  url: string,
  dir: string,
  args: string[],
  options: { names?: boolean; keepDumps?: boolean } = {},
): Promise<CountedServer> {
  mkdirSync(dir, { recursive: true });
  const preload = writePreload(dir, 1);
  const scriptEnv = { ...env, NODE_OPTIONS: `--import=${preload}` };
  const [command, ...rest] = [...valgrind(dir), process.execPath, ...NODE_FLAGS(options.names), ...args];
  const child = spawn(command!, rest, { env: scriptEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const proc: ServerProcess = { child, exited, output: () => output };
  for (let attempt = 0; ; attempt++) {
    // 600 s: under valgrind on a loaded machine (load average 30) 120 s were not enough.
    if (attempt > 6000) throw new Error(`${args.join(' ')} did not start: ${output}`);
    try {
      if ((await fetch(`${url}/ping`)).status === 200) break;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  return counting(proc, dir, scriptEnv, options);
}

function counting(
  proc: ServerProcess,
  dir: string,
  env: Record<string, string>,
  options: { names?: boolean; keepDumps?: boolean },
): CountedServer {
  const pid = proc.child.pid!;
  const perfFile = options.names ? `/tmp/perf-${pid}.map` : null;
  const control = async (option: '-i' | '-z' | '-d', arg?: string): Promise<string | null> => {
    const before = new Set(readdirSync(dir));
    // The server's environment: vgdb finds the process's pipes by names made of USER and HOST.
    const { stdout, stderr } = await run('callgrind_control', [option, ...(arg ? [arg] : []), String(pid)], {
      timeout: 600_000,
      env,
    });
    if (/error|failed/i.test(stderr)) throw new Error(`callgrind_control ${option}: ${stderr}`);
    if (process.env.BENCH_DEBUG) process.stderr.write(stdout + stderr);
    if (option !== '-d') return null;
    for (let attempt = 0; attempt < 600; attempt++) {
      for (const name of readdirSync(dir).filter((name) => !before.has(name) && name.startsWith('callgrind.out'))) {
        const file = path.join(dir, name);
        if (/^(?:totals|summary): \d+/m.test(readFileSync(file, 'utf8'))) return file;
      }
      await sleep(100);
    }
    throw new Error('callgrind wrote no dump');
  };
  let collections = 0;
  const collect = async () => {
    collections++;
    proc.child.kill('SIGUSR2');
    for (let attempt = 0; proc.output().split(GC_DONE).length - 1 < collections; attempt++) {
      if (attempt > 3000) throw new Error(`no garbage collection: ${proc.output()}`);
      await sleep(100);
    }
  };
  return {
    proc,
    async windowed(work) {
      await collect();
      await control('-i', 'on');
      await control('-z');
      const started = performance.now();
      await work();
      await collect();
      const file = (await control('-d'))!;
      const seconds = (performance.now() - started) / 1000;
      await control('-i', 'off');
      const counted = await annotate(file, options.names ? new PerfMap(perfFile) : null);
      if (!options.keepDumps) rmSync(file, { force: true });
      return { ...counted, seconds, count: 0 };
    },
    async settle(work) {
      await collect();
      await work();
      await collect();
    },
    async close() {
      await stop(proc, 120);
      if (options.keepDumps) writeFileSync(path.join(dir, 'server.log'), proc.output());
      // Kept with the dumps, so that callgrind_annotate's JIT addresses can be named afterwards.
      if (perfFile && options.keepDumps && existsSync(perfFile)) copyFileSync(perfFile, path.join(dir, 'perf.map'));
      if (perfFile) rmSync(perfFile, { force: true });
    },
  };
}
