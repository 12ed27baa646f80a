import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { defineConfig, type TestProjectInlineConfiguration } from 'vitest/config';
import { cliEntry } from './test/helpers/cliEntry.js';

/**
 * Two tiers (docs/testing.md, "Two tiers"):
 *
 * - `fast` (`npm test`): unit and HTTP-level suites on SQLite, at most one server process per
 *   file, nothing outside this checkout. TEST_DATABASE_URL and TEST_REDIS_URL are cleared for it,
 *   so it runs the same whether they are exported or not.
 * - `full` (`npm run test:all` adds it, CI runs it): what a file needs decides, from its text —
 *   PostgreSQL or Redis by name (TEST_DATABASE_URL, TEST_REDIS_URL, a redis-server of its own),
 *   the browser (test/e2e), valgrind, or several server processes (two or more places that start
 *   one). A file may also say `@tier full` in a comment. These run on every dialect available.
 * - `postgres` (with TEST_DATABASE_URL, in `npm run test:all`): the fast tier's database suites
 *   (those using DIALECTS) again on PostgreSQL only, their SQLite half having run in `fast`:
 *   every suite runs once per dialect, none twice.
 */
const ROOT = import.meta.dirname;
const SUITES = ['test', 'client/test'];

function testFiles(dir: string): string[] {
  return readdirSync(path.join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.test.ts'))
    .map((file) => path.posix.join(dir, file.split(path.sep).join('/')))
    .sort();
}

/** Places that start a process: `startServerProcess(…)`, `suiteServer(…)` or `spawn(…)` calls, imports aside. */
function processStarts(text: string): number {
  return text.split('\n').filter((line) => !/^\s*import\b/.test(line) && /\b(startServerProcess|suiteServer|spawn)\(/.test(line)).length;
}

export function needsFullTier(file: string, text: string): boolean {
  return (
    file.startsWith('test/e2e/') ||
    /@tier full\b/.test(text) ||
    /\bTEST_DATABASE_URL\b|\bTEST_REDIS_URL\b|\bRedisServer\b|\bvalgrind\b|\bcallgrind\b|\/usr\/bin\/chromium/.test(text) ||
    processStarts(text) >= 2
  );
}

const files = SUITES.flatMap(testFiles).map((file) => ({ file, text: readFileSync(path.join(ROOT, file), 'utf8') }));
const full = files.filter(({ file, text }) => needsFullTier(file, text)).map(({ file }) => file);
const fast = files.filter(({ file }) => !full.includes(file)).map(({ file }) => file);
const fastOnDatabases = files.filter(({ file, text }) => fast.includes(file) && /\bDIALECTS\b/.test(text)).map(({ file }) => file);

// Say once which `orgdata` the suites' processes run (test/helpers/cliEntry.ts).
if (!process.env.VITEST_WORKER_ID && cliEntry(ROOT).length > 1) {
  console.log('orgdata processes run src/cli.ts through tsx: dist/ is older than a source (npm run build makes them start faster)');
}

const shared = { testTimeout: 30_000, hookTimeout: 30_000 };
/**
 * The fast tier's files share their worker's modules (`isolate: false`): the app's sources are
 * loaded once per worker instead of once per file, which was most of a fast file's time. Safe
 * because src/ keeps no state between apps but caches of compiled schemas and prepared statements,
 * and the suites restore what they change (process.env, fake timers). The full tier stays isolated:
 * its files start processes and browsers, and its time is spent waiting on them.
 */
const unisolated = { isolate: false };
const projects: TestProjectInlineConfiguration[] = [
  {
    test: { ...shared, ...unisolated, name: 'fast', include: fast, env: { TEST_DATABASE_URL: '', TEST_REDIS_URL: '', TEST_DIALECTS: '' } },
  },
  { test: { ...shared, name: 'full', include: full } },
];
if (process.env.TEST_DATABASE_URL) {
  projects.push({ test: { ...shared, ...unisolated, name: 'postgres', include: fastOnDatabases, env: { TEST_DIALECTS: 'postgres' } } });
}

/**
 * Two files at a time. Vitest's default is one fewer than the cores, which on our 2-core machines
 * is one: every file waited for the one before, though most of a file's time is spent waiting on
 * a server process, PostgreSQL or the browser rather than on the CPU.
 */
export default defineConfig({ test: { projects, maxWorkers: 2 } });
