#!/usr/bin/env node
/*
 * The `prepare` script of the server and of the client workspace: compiles the package in the
 * current folder with its tsconfig.build.json (src/ → dist/) when TypeScript is installed, as it is
 * after `npm install` or `npm ci`. A production install (`npm ci --omit=dev`) has no TypeScript:
 * then it compiles nothing and says so, instead of failing the install. Such an install runs the
 * dist/ built beforehand with the dev dependencies (scripts/build-runtime.sh, the Dockerfile).
 * Plain JavaScript on purpose: it runs before anything is built, with nothing but Node.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const here = process.cwd();
const name = path.basename(here);
let tsc = null;
try {
  tsc = createRequire(path.join(here, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  // No TypeScript: a production install.
}
if (tsc) {
  execFileSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
} else if (existsSync(path.join(here, 'dist'))) {
  console.log(`${name}: no TypeScript here (a production install): dist/ is used as built`);
} else {
  console.log(
    `${name}: no TypeScript here (a production install) and no dist/: build it first with the dev dependencies ` +
      '(`npm ci && npm run build`, or scripts/build-runtime.sh; README, "Deploy")',
  );
}
