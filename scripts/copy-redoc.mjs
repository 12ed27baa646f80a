#!/usr/bin/env node
/*
 * The server's build step after compiling (`npm run build`, `prepare`): copies the API reference's
 * renderer, Redoc's self-contained browser bundle with its licence and package.json, into
 * dist/assets/redoc. Redoc is a dev dependency (with its peers 85 MB), so a production install
 * (`npm ci --omit=dev`) has none: there it copies nothing and dist/ is served as built
 * (src/http/redocAssets.ts). Plain JavaScript, like compile.mjs: it runs with nothing but Node.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const here = process.cwd();
let redoc = null;
try {
  redoc = path.dirname(createRequire(path.join(here, 'package.json')).resolve('redoc/package.json'));
} catch {
  // No redoc: a production install.
}
if (redoc) {
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
} else {
  console.log('orgdata: no redoc here (a production install): dist/assets/redoc is used as built');
}
