import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { attribute, kindOf, PerfMap, readDumps, total } from '../bench/attribution.js';

// bench/attribution.ts (issue 46's account by function): a builtin's instructions go to the
// JavaScript that called it, in proportion to its calls' costs, through builtins calling builtins;
// SQLite, the collector and JavaScript keep their own. Two dumps written by hand (the header
// lines the reader skips left out), with a perf map.

const dir = mkdtempSync(path.join(tmpdir(), 'attribution-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const perfFile = path.join(dir, 'perf.map');
writeFileSync(
  perfFile,
  [
    "1000 100 JS:*'alpha file:///work/main/dist/domain/a.js:1:1",
    "2000 100 JS:+'beta file:///work/main/dist/domain/b.js:2:1",
    '3000 100 Builtin:MapPrototypeSet',
  ].join('\n'),
);

// alpha (JS, two basic blocks: 0x1000 and 0x1040) calls MapPrototypeSet (50), beta (30) and the
// runtime (25); beta calls MapPrototypeSet (20) and SQLite through napi (40); the runtime calls
// the scavenger (15); napi's own 8 go to beta, SQLite's 32 stay SQLite's.
const first = `version: 1
positions: line
events: Ir

ob=(1) /usr/bin/node
fl=(1) ???
fn=(1) 0x0000000000001000
0 100
cfn=(2) 0x0000000000003000
calls=1 0
0 50
cfn=(3) 0x0000000000002000
calls=1 0
0 30
cfn=(4) v8::internal::Runtime_Something(int, unsigned long*, v8::internal::Isolate*)
calls=1 0
0 25

fn=(5) 0x0000000000001040
0 7

fn=(2)
0 70

fn=(3)
0 10
cfn=(2)
calls=1 0
0 20
cfn=(6) napi_call_function
calls=1 0
0 40

fn=(4)
0 10
cfn=(7) v8::internal::Scavenger::ScavengeObject(v8::internal::FullHeapObjectSlot)
calls=1 0
0 15

fn=(7)
0 15

fn=(6)
0 8
cob=(2) /work/main/node_modules/better-sqlite3/build/Release/linux-x64.node
cfn=(8) sqlite3VdbeExec
calls=1 0
0 32

ob=(2)
fn=(8)
0 32
`;
// A second dump, its own name table: alpha again, 5 of its own and 5 of MapPrototypeSet.
const second = `version: 1
positions: line
events: Ir

ob=(1) /usr/bin/node
fn=(9) 0x0000000000001000
0 5
cfn=(3) 0x0000000000003000
calls=1 0
0 5
fn=(3)
0 5
`;

describe('bench/attribution.ts', () => {
  const { self, callers } = readDumps([first, second], new PerfMap(perfFile));
  const held = attribute(self, callers);
  const of = (name: string) => total(held.get(name) ?? new Map());
  const ALPHA = "'alpha dist/domain/a.js";
  const BETA = "'beta dist/domain/b.js";

  it('names JIT code through the perf map and sums a function over its blocks and dumps', () => {
    expect(self.get(ALPHA)).toBe(100 + 7 + 5);
    expect(self.get('Builtins_MapPrototypeSet')).toBe(70 + 5);
    expect(kindOf(ALPHA)).toBe('js');
    expect(kindOf('Builtins_MapPrototypeSet')).toBe('other');
    expect(kindOf('sqlite3VdbeExec [linux-x64.node]')).toBe('sqlite');
  });

  it("gives a builtin's instructions to its callers in proportion to their calls' costs", () => {
    // MapPrototypeSet's 75: alpha's calls cost 50 + 5, beta's 20. The runtime's 10 are alpha's.
    expect(of(ALPHA)).toBeCloseTo(112 + (75 * 55) / 75 + 10, 6);
    // beta: its 10, MapPrototypeSet's 20, napi's 8; SQLite's 32 are not beta's.
    expect(of(BETA)).toBeCloseTo(10 + (75 * 20) / 75 + 8, 6);
    expect(held.get(ALPHA)!.get('Builtins_MapPrototypeSet')).toBeCloseTo(55, 6);
  });

  it('leaves SQLite, the collector and JavaScript their own, and loses nothing', () => {
    expect(of('sqlite3VdbeExec [linux-x64.node]')).toBe(32);
    expect(of('v8::internal::Scavenger::ScavengeObject(v8::internal::FullHeapObjectSlot) [node]')).toBe(15);
    expect(of('Builtins_MapPrototypeSet')).toBe(0);
    const all = [...held.values()].reduce((sum, spent) => sum + total(spent), 0);
    const spent = [...self.values()].reduce((sum, cost) => sum + cost, 0);
    expect(all).toBeCloseTo(spent, 6);
  });
});
