/**
 * Instructions by the JavaScript function that spent them, read from callgrind dumps of a Node
 * process run with a perf map (bench/byFunction.ts prints them; issue 46).
 *
 * bench/budget.ts's functions table counts each function's own instructions, so a builtin
 * (`MapPrototypeSet`, `StringEqual`, a megamorphic load), V8's runtime or libc stands apart from
 * the code that called it, and an account of the domain's own work could only be a remainder.
 * Here such code's instructions go to its callers in proportion to what each one's calls of it
 * cost (callgrind's inclusive call costs), from caller to caller, until they reach a function that
 * keeps them: JavaScript (ours, a library's, Node's, or code made by `new Function`: Ajv's
 * validators, the serializers), SQLite with better-sqlite3's native side (the statements and the
 * binding of their values), the garbage collector (whoever allocated last would pay: a row of its
 * own) or V8's compilers (left out of bench:check's figures). The share is exact for code with one
 * caller and an estimate for code many callers share (a caller whose calls of it cost more gets
 * more). Our own format-reading: no library reads callgrind's call graph into a program.
 */
import { readFileSync } from 'node:fs';
import { COMPILER_FUNCTION, functionName, PerfMap } from './callgrind.js';

export { PerfMap };

export type Kind = 'js' | 'sqlite' | 'gc' | 'compiler' | 'other';

const GC = /Scaveng|v8::internal::Heap::|MarkCompact|Marking|Sweep|Evacuat|MemoryAllocator|PagedSpace|SemiSpace|ConcurrentMarking/;

/** What keeps the instructions of a function (named as functionName names it). */
export function kindOf(name: string): Kind {
  if (name.endsWith('[linux-x64.node]') || name.endsWith('[better_sqlite3.node]')) return 'sqlite';
  if (GC.test(name)) return 'gc';
  if (COMPILER_FUNCTION.test(name)) return 'compiler';
  // Native code (a symbol and its library), a builtin, a regular expression's code, JIT code the
  // perf map does not name: passed up to its callers. Anything else is JavaScript.
  if (/\[[^\]]+\]$/.test(name) || /^(Builtins_|RegExp|\(JIT code)/.test(name)) return 'other';
  return 'js';
}

/** A function's instructions once passed up: where they were spent (the function itself, or what it called). */
export type Attributed = Map<string, Map<string, number>>;

const add = (map: Map<string, number>, key: string, cost: number) => map.set(key, (map.get(key) ?? 0) + cost);

/** Self costs and call edges (callee → caller → inclusive cost) of callgrind dumps, functions named through `perf`. */
export function readDumps(texts: string[], perf: PerfMap) {
  const self = new Map<string, number>();
  const callers = new Map<string, Map<string, number>>();
  for (const text of texts) {
    const names = new Map<string, string>();
    const objects = new Map<string, string>();
    // Callgrind's name compression: "(id) name" defines, "(id)" refers.
    const resolve = (spec: string, table: Map<string, string>) => {
      const match = /^\((\d+)\)(?: (.*))?$/.exec(spec);
      if (!match) return spec;
      if (match[2] !== undefined) table.set(match[1]!, match[2]);
      return table.get(match[1]!) ?? spec;
    };
    let object = '';
    let callObject = '';
    let fn = '';
    let callee = '';
    let inCall = false;
    for (const line of text.split('\n')) {
      if (line.length === 0) continue;
      const c = line.charCodeAt(0);
      // A cost line: a position (a number, +n, -n or *) and the cost; after `calls=`, the call's inclusive cost.
      if ((c >= 48 && c <= 57) || c === 43 || c === 45 || c === 42) {
        const cost = Number(line.split(' ')[1] ?? 0);
        if (!inCall) add(self, fn, cost);
        else if (callee !== fn) {
          let of = callers.get(callee);
          if (!of) callers.set(callee, (of = new Map()));
          add(of, fn, cost);
        }
        inCall = false;
      } else if (line.startsWith('ob=')) object = resolve(line.slice(3), objects);
      else if (line.startsWith('cob=')) callObject = resolve(line.slice(4), objects);
      else if (line.startsWith('fn=')) {
        fn = functionName('', resolve(line.slice(3), names), object, perf);
        callObject = object;
      } else if (line.startsWith('cfn=')) callee = functionName('', resolve(line.slice(4), names), callObject, perf);
      else if (line.startsWith('calls=')) inCall = true;
    }
  }
  return { self, callers };
}

/** Every function's self cost passed up to the functions that keep it (see the file's comment). */
export function attribute(self: Map<string, number>, callers: Map<string, Map<string, number>>): Attributed {
  const held: Attributed = new Map();
  for (const [name, cost] of self) held.set(name, new Map([[name, cost]]));
  for (let round = 0; round < 100; round++) {
    let moved = 0;
    for (const [name, spent] of held) {
      if (spent.size === 0 || kindOf(name) !== 'other') continue;
      const of = callers.get(name);
      if (!of || of.size === 0) continue;
      let total = 0;
      for (const weight of of.values()) total += weight;
      if (total === 0) continue;
      for (const [caller, weight] of of) {
        let into = held.get(caller);
        if (!into) held.set(caller, (into = new Map()));
        for (const [where, cost] of spent) {
          add(into, where, (cost * weight) / total);
          moved += (cost * weight) / total;
        }
      }
      held.set(name, new Map());
    }
    if (moved < 1) break;
  }
  return held;
}

/** bench/byFunction.ts's reading: the dumps of a directory with its perf.map. */
export function attributeFiles(files: string[], perfFile: string): Attributed {
  const { self, callers } = readDumps(
    files.map((file) => readFileSync(file, 'utf8')),
    new PerfMap(perfFile),
  );
  return attribute(self, callers);
}

export const total = (spent: Map<string, number>) => [...spent.values()].reduce((sum, cost) => sum + cost, 0);
