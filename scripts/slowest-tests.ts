// Reads vitest's JSON report (artifacts/vitest.json in CI) and prints the totals and the slowest
// files with their wall time, so that CI's log says where the test step's time went.
// Usage: npx tsx scripts/slowest-tests.ts <report.json> [count]
import { readFileSync } from 'node:fs';

const [report, count = '10'] = process.argv.slice(2);
interface Report {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTotalTestSuites: number;
  testResults: { name: string; startTime: number; endTime: number; assertionResults: unknown[] }[];
}

const r = JSON.parse(readFileSync(report!, 'utf8')) as Report;
console.log(
  `tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed${r.numPendingTests ? `, ${r.numPendingTests} skipped` : ''}` +
    ` in ${r.numTotalTestSuites} suites, ${r.testResults.length} files`,
);
const root = process.cwd() + '/';
const files = r.testResults
  .map((f) => ({ name: f.name.replace(root, ''), seconds: (f.endTime - f.startTime) / 1000, tests: f.assertionResults.length }))
  .sort((a, b) => b.seconds - a.seconds);
const total = files.reduce((sum, f) => sum + f.seconds, 0);
console.log(`the ${count} slowest files (wall time per file; ${total.toFixed(0)} s summed over all files, which run two at a time):`);
for (const f of files.slice(0, Number(count))) {
  console.log(`${f.seconds.toFixed(1).padStart(8)} s  ${String(f.tests).padStart(4)} tests  ${f.name}`);
}
