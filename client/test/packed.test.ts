import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type OrgdataServer } from './helpers/server.js';

const exec = promisify(execFile);
const CLIENT = path.resolve(import.meta.dirname, '..');
const ROOT = path.resolve(CLIENT, '..');
const TSC = path.join(ROOT, 'node_modules/typescript/bin/tsc');

// npm as a user runs it: without the npm_config_* and npm_package_* settings that `npm test` hands
// its children (they would steer the nested npm, e.g. toward the workspace).
const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)));
const run = (command: string, args: string[], cwd: string, extra: Record<string, string> = {}) =>
  exec(command, args, { cwd, env: { ...env, ...extra }, maxBuffer: 16 * 1024 * 1024 });

/** npm's warnings (`npm warn …`), one a line: a user installing the tarball must see none. */
const warnings = (output: string) => output.split('\n').filter((line) => /\bwarn\b/i.test(line));

interface Packed {
  filename: string;
  files: { path: string }[];
}

/**
 * The install path the README gives (the package is on no registry yet): `npm pack` in client/,
 * then `npm install` of that file in projects of one's own, offline: a CommonJS project as
 * `npm init -y` makes it, an ES module one, and TypeScript in each mode; each talks to a real server.
 */
describe('@orgdata/client installed from the file `npm pack` makes', { timeout: 240_000 }, () => {
  let server: OrgdataServer;
  const work = mkdtempSync(path.join(tmpdir(), 'orgdata-pack-'));
  let packed: Packed;
  let tarball: string;
  const { version } = JSON.parse(readFileSync(path.join(CLIENT, 'package.json'), 'utf8')) as { version: string };

  beforeAll(async () => {
    server = await startServer();
    // Once for every project below. --ignore-scripts: `prepack` would rebuild dist/ while other test
    // files import it; package.test.ts fails when dist/ is older than the sources.
    const { stdout } = await run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], CLIENT);
    packed = (JSON.parse(stdout) as Packed[])[0]!;
    tarball = path.join(work, packed.filename);
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  /** A project of one's own with the tarball installed offline (it has no dependencies to download). */
  async function project(name: string, manifest?: Record<string, unknown>): Promise<string> {
    const dir = path.join(work, name);
    mkdirSync(dir);
    if (manifest) writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name, private: true, ...manifest }));
    else await run('npm', ['init', '-y'], dir);
    const { stdout, stderr } = await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], dir);
    expect(warnings(stdout + stderr), 'npm install of the tarball warned').toEqual([]);
    return dir;
  }

  const api = () => ({ ORGDATA_API_KEY: server.apiKey, ORGDATA_BASE_URL: server.baseUrl });

  it('holds both builds, their types, the README and the manifest, and nothing that runs on install', () => {
    // The README names this file: keep them in step.
    expect(packed.filename).toBe(`orgdata-client-${version}.tgz`);
    expect(readFileSync(path.join(CLIENT, 'README.md'), 'utf8')).toContain(`orgdata-client-${version}.tgz`);

    const files = packed.files.map((f) => f.path);
    for (const file of [
      'package.json',
      'README.md',
      'dist/esm/index.js',
      'dist/esm/index.d.ts',
      'dist/cjs/index.js',
      'dist/cjs/index.d.ts',
      'dist/cjs/package.json',
    ]) {
      expect(files).toContain(file);
    }
    expect(files.filter((f) => /(^|\/)test\/|\.test\.|tsbuildinfo|^scripts\/|tsconfig/.test(f))).toEqual([]);

    const manifest = JSON.parse(readFileSync(path.join(CLIENT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    const onInstall = ['preinstall', 'install', 'postinstall', 'prepare'].filter((name) => name in manifest.scripts);
    expect(onInstall).toEqual([]);
  });

  it('is required from a fresh CommonJS project (npm init -y) and talks to the API', async () => {
    const dir = await project('commonjs');
    expect(JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8'))).not.toHaveProperty('type', 'module');
    writeFileSync(
      path.join(dir, 'index.js'),
      `const { Orgdata, OrgdataError } = require('@orgdata/client');
const orgdata = new Orgdata();
(async () => {
  const made = await orgdata.contacts.create({ first_name: 'Required', email: 'required@example.com' });
  const again = await orgdata.contacts.create({ first_name: 'Again', email: 'required@example.com' }).catch((e) => e);
  const seen = [];
  for await (const contact of orgdata.contacts.list({ email: 'required@example.com', limit: 1 })) seen.push(contact.id);
  console.log(JSON.stringify({ id: made.id, seen, error: again instanceof OrgdataError, code: again.code }));
})();
`,
    );
    const { stdout } = await run(process.execPath, ['index.js'], dir, api());
    const result = JSON.parse(stdout) as { id: string; seen: string[]; error: boolean; code: string };
    expect(result.id).toMatch(/^con_/);
    expect(result).toEqual({ id: result.id, seen: [result.id], error: true, code: 'contact_exists' });
  });

  it('is imported from an ES module project and talks to the API', async () => {
    const dir = await project('esm', { type: 'module' });
    writeFileSync(
      path.join(dir, 'sync.js'),
      `import { Orgdata } from '@orgdata/client';
const orgdata = new Orgdata();
const made = await orgdata.contacts.create({ first_name: 'Packed', email: 'packed@example.com' });
const seen = [];
for await (const contact of orgdata.contacts.list({ email: 'packed@example.com', limit: 1 })) seen.push(contact.email);
console.log(JSON.stringify({ id: made.id, source: made.source_type, seen }));
`,
    );
    const { stdout } = await run(process.execPath, ['sync.js'], dir, api());
    const result = JSON.parse(stdout) as { id: string; source: string; seen: string[] };
    expect(result.id).toMatch(/^con_/);
    expect(result.source).toBe('api');
    expect(result.seen).toEqual(['packed@example.com']);
  });

  // TypeScript resolves `require` and `import` to their own declarations (module nodenext): CommonJS
  // code given the ESM types fails with TS1479, and the reverse hides named exports.
  for (const mode of ['commonjs', 'module'] as const) {
    it(`type-checks and runs in a TypeScript project of type ${mode} (module nodenext)`, async () => {
      const dir = await project(`typescript-${mode}`, { type: mode });
      writeFileSync(
        path.join(dir, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            module: 'nodenext',
            moduleResolution: 'nodenext',
            target: 'es2022',
            strict: true,
            skipLibCheck: false,
            outDir: 'out',
            types: ['node'],
            typeRoots: [path.join(ROOT, 'node_modules/@types')],
          },
          include: ['main.ts'],
        }),
      );
      writeFileSync(
        path.join(dir, 'main.ts'),
        `import { Orgdata, OrgdataError, type Contact, type OrgdataErrorCode } from '@orgdata/client';

async function main(): Promise<void> {
  const orgdata = new Orgdata({ apiKey: process.env.ORGDATA_API_KEY, baseUrl: process.env.ORGDATA_BASE_URL });
  const made: Contact = await orgdata.contacts.create({ first_name: 'Typed', email: 'typed-${mode}@example.com' });
  const failure: unknown = await orgdata.contacts.get('con_missing').catch((e: unknown) => e);
  const code: OrgdataErrorCode | undefined = failure instanceof OrgdataError ? failure.code : undefined;
  console.log(JSON.stringify({ id: made.id, code }));
}
void main();
`,
      );
      const compiled = await run(process.execPath, [TSC, '-p', '.'], dir).catch((e: { stdout: string }) => e);
      expect(compiled.stdout).toBe('');
      const { stdout } = await run(process.execPath, ['out/main.js'], dir, api());
      const result = JSON.parse(stdout) as { id: string; code: string };
      expect(result.id).toMatch(/^con_/);
      expect(result.code).toBe('not_found');
    });
  }

  // A browser or edge project has no @types/node: the declarations must not need it (they once
  // imported node:stream for the upload body's type).
  it('type-checks in a TypeScript project without @types/node (lib es2022 + dom, types [])', async () => {
    const dir = await project('typescript-no-node-types', { type: 'module' });
    writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'nodenext',
          moduleResolution: 'nodenext',
          target: 'es2022',
          lib: ['es2022', 'dom', 'dom.iterable'],
          strict: true,
          skipLibCheck: false,
          noEmit: true,
          types: [],
        },
        include: ['main.ts'],
      }),
    );
    writeFileSync(
      path.join(dir, 'main.ts'),
      `import { Orgdata, type Contact } from '@orgdata/client';

export async function main(apiKey: string, file: Blob): Promise<string> {
  const orgdata = new Orgdata({ apiKey, baseUrl: 'https://orgdata.example.com/api/v1' });
  const made: Contact = await orgdata.contacts.create({ first_name: 'Typed', email: 'typed@example.com' });
  await orgdata.files.upload({ name: 'a.txt', contentType: 'text/plain', body: file });
  return made.id + typeof Orgdata.webhooks.verify;
}
`,
    );
    const compiled = await run(process.execPath, [TSC, '-p', '.'], dir).catch((e: { stdout: string }) => e);
    expect(compiled.stdout).toBe('');
  });

  it('refuses a base URL without /api/v1 when constructed, from the option or ORGDATA_BASE_URL', async () => {
    const dir = await project('wrong-base');
    writeFileSync(
      path.join(dir, 'index.js'),
      `const { Orgdata } = require('@orgdata/client');
const tried = (options) => { try { new Orgdata(options); return 'accepted'; } catch (e) { return e.message; } };
console.log(JSON.stringify({
  option: tried({ apiKey: process.env.ORGDATA_API_KEY, baseUrl: process.argv[2] }),
  env: tried({ apiKey: process.env.ORGDATA_API_KEY }),
  right: tried({ apiKey: process.env.ORGDATA_API_KEY, baseUrl: process.argv[3] }),
}));
`,
    );
    const { stdout } = await run(process.execPath, ['index.js', server.origin, `${server.baseUrl}/`], dir, {
      ORGDATA_API_KEY: server.apiKey,
      ORGDATA_BASE_URL: server.origin,
    });
    expect(JSON.parse(stdout)).toEqual({
      option: `Orgdata: baseUrl should end in /api/v1, such as https://orgdata.example.com/api/v1: got ${server.origin}`,
      env: `Orgdata: ORGDATA_BASE_URL should end in /api/v1, such as https://orgdata.example.com/api/v1: got ${server.origin}`,
      right: 'accepted',
    });
  });

  it('passes `npm publish --dry-run` (nothing is published)', async () => {
    // --offline: the dry run otherwise asks the registry who is logged in, and only warns when no one is.
    const { stdout, stderr } = await run('npm', ['publish', '--dry-run', '--offline', '--ignore-scripts'], CLIENT);
    expect(stdout + stderr).toContain(`@orgdata/client@${version}`);
    expect(stderr).toContain('(dry-run)');
    // npm warns when it has to correct the manifest (a bad repository, bin or files field); the only
    // warning left is that no one is logged in, which a dry run does not need.
    expect(warnings(stderr).filter((line) => !/requires you to be logged in/.test(line))).toEqual([]);
  });
});
