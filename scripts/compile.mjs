#!/usr/bin/env node
/*
 * The `prepare` script of the server and of the client workspace: compiles the package in the
 * current folder with its tsconfig.build.json (src/ → dist/) when TypeScript is installed, as it is
 * after `npm install` or `npm ci`. A production install (`npm ci --omit=dev`) has no TypeScript:
 * then it compiles nothing and says so, instead of failing the install. Such an install runs the
 * dist/ built beforehand with the dev dependencies (scripts/build-runtime.sh, the Dockerfile).
 * The server's build also copies the API reference's renderer (Redoc's browser bundle, its licence
 * and its package.json: a dev dependency) into dist/assets/redoc, from where a production install
 * serves it (src/http/redocAssets.ts). `npm run build` runs this script too.
 * Plain JavaScript on purpose: it runs before anything is built, with nothing but Node.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
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
  if (JSON.parse(readFileSync(path.join(here, 'package.json'), 'utf8')).name === 'orgdata') copyRedoc();
} else if (existsSync(path.join(here, 'dist'))) {
  console.log(`${name}: no TypeScript here (a production install): dist/ is used as built`);
} else {
  console.log(
    `${name}: no TypeScript here (a production install) and no dist/: build it first with the dev dependencies ` +
      '(`npm ci && npm run build`, or scripts/build-runtime.sh; README, "Deploy")',
  );
}

/** Redoc's bundle into dist/assets/redoc: the production install has no node_modules/redoc. */
function copyRedoc() {
  const redoc = path.dirname(createRequire(path.join(here, 'package.json')).resolve('redoc/package.json'));
  const into = path.join(here, 'dist', 'assets', 'redoc');
  mkdirSync(into, { recursive: true });
  for (const [from, to] of [
    ['bundles/redoc.standalone.js', 'redoc.standalone.js'],
    ['bundles/redoc.standalone.js.LICENSE.txt', 'redoc.standalone.js.LICENSE.txt'],
    ['LICENSE', 'LICENSE'],
    ['package.json', 'package.json'],
  ]) {
    copyFileSync(path.join(redoc, from), path.join(into, to));
  }
}
