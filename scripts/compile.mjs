#!/usr/bin/env node
/*
 * The `prepare` script of the server, which also builds the client workspace:
 * `node scripts/compile.mjs [FOLDER...]` compiles each folder (default: the current one) with its
 * tsconfig.build.json when TypeScript is installed, as it is after `npm install` or `npm ci`. A
 * folder with a tsconfig.cjs.json is built a second time as CommonJS into dist/cjs/, marked so by a
 * package.json there (tsc emits none): the client ships both formats. The client has no `prepare` of
 * its own, since npm warns about one when a project installs the packed client.
 * A production install (`npm ci --omit=dev`) has no TypeScript: then it compiles nothing and says
 * so, instead of failing the install. Such an install runs the dist/ built beforehand with the dev
 * dependencies (scripts/build-runtime.sh, the Dockerfile); the client is not needed there.
 * Plain JavaScript on purpose: it runs before anything is built, with nothing but Node.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const here = process.cwd();
const folders = (process.argv.length > 2 ? process.argv.slice(2) : ['.']).map((folder) => path.resolve(here, folder));
let tsc = null;
try {
  tsc = createRequire(path.join(here, 'package.json')).resolve('typescript/bin/tsc');
} catch {
  // No TypeScript: a production install.
}
if (tsc) {
  for (const folder of folders) {
    const compile = (config) => execFileSync(process.execPath, [tsc, '-p', config], { cwd: folder, stdio: 'inherit' });
    compile('tsconfig.build.json');
    if (existsSync(path.join(folder, 'tsconfig.cjs.json'))) {
      compile('tsconfig.cjs.json');
      mkdirSync(path.join(folder, 'dist/cjs'), { recursive: true });
      writeFileSync(path.join(folder, 'dist/cjs/package.json'), '{ "type": "commonjs" }\n');
    }
  }
} else {
  const name = path.basename(folders[0]);
  if (existsSync(path.join(folders[0], 'dist'))) {
    console.log(`${name}: no TypeScript here (a production install): dist/ is used as built`);
  } else {
    console.log(
      `${name}: no TypeScript here (a production install) and no dist/: build it first with the dev dependencies ` +
        '(`npm ci && npm run build`, or scripts/build-runtime.sh; docs/deploy.md)',
    );
  }
}
