import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

/**
 * How the tests start `orgdata` as a process: the built `dist/cli.js` (what `npm start` runs) when
 * it was built after every file it is built from last changed, else `src/cli.ts` through tsx.
 *
 * Why: tsx compiles the sources again in every process, about a second of CPU per CLI command and
 * more per server, and the suite starts hundreds of them. CI builds dist/ on install (`prepare`),
 * so there every process runs the build; a developer who edited a source without building gets
 * tsx, slower but never stale. The rule is mtimes: every build's last step writes `dist/.built`
 * (scripts/copy-assets.mjs; a failed compile stops before it), and an edit or a checkout gives a
 * source a newer time than that. ORGDATA_TEST_CLI=tsx forces the sources.
 */
export function cliEntry(root: string): string[] {
  const source = ['--import', 'tsx', path.join(root, 'src/cli.ts')];
  if (process.env.ORGDATA_TEST_CLI === 'tsx') return source;
  let isFresh = fresh.get(root);
  if (isFresh === undefined) fresh.set(root, (isFresh = builtAfterSources(root)));
  return isFresh ? [path.join(root, 'dist/cli.js')] : source;
}

const fresh = new Map<string, boolean>();

function builtAfterSources(root: string): boolean {
  let builtAt: number;
  try {
    builtAt = statSync(path.join(root, 'dist/.built')).mtimeMs;
  } catch {
    return false;
  }
  const inputs = ['package.json', 'tsconfig.json', 'tsconfig.build.json'].map((file) => path.join(root, file));
  for (const entry of readdirSync(path.join(root, 'src'), { recursive: true, withFileTypes: true })) {
    if (entry.isFile()) inputs.push(path.join(entry.parentPath, entry.name));
  }
  return inputs.every((file) => statSync(file).mtimeMs <= builtAt);
}
