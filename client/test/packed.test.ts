import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type OrgdataServer } from './helpers/server.js';

const run = promisify(execFile);
const CLIENT = path.resolve(import.meta.dirname, '..');

/**
 * The install path the README gives (the package is on no registry): `npm pack` in client/, then
 * `npm install` of that file in a project of one's own, offline, and the import working there
 * against a real server.
 */
describe('@orgdata/client installed from the file `npm pack` makes', { timeout: 180_000 }, () => {
  let server: OrgdataServer;
  const work = mkdtempSync(path.join(tmpdir(), 'orgdata-pack-'));

  beforeAll(async () => {
    server = await startServer();
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    rmSync(work, { recursive: true, force: true });
  });

  it('packs, installs offline into another project, and talks to the API', async () => {
    const { version } = JSON.parse(readFileSync(path.join(CLIENT, 'package.json'), 'utf8')) as { version: string };
    await run('npm', ['pack', '--pack-destination', work], { cwd: CLIENT });
    const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
    // The README names this file: keep them in step.
    expect(tarball).toBe(`orgdata-client-${version}.tgz`);
    expect(readFileSync(path.join(CLIENT, 'README.md'), 'utf8')).toContain(`orgdata-client-${version}.tgz`);

    const project = path.join(work, 'project');
    await run('mkdir', ['-p', project]);
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'my-integration', private: true, type: 'module' }));
    // Offline: the client has no dependencies, so installing the file downloads nothing.
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', path.join(work, tarball!)], { cwd: project });
    writeFileSync(
      path.join(project, 'sync.js'),
      `import { Orgdata } from '@orgdata/client';
const orgdata = new Orgdata();
const made = await orgdata.contacts.create({ first_name: 'Packed', email: 'packed@example.com' });
const seen = [];
for await (const contact of orgdata.contacts.list({ limit: 1 })) seen.push(contact.email);
console.log(JSON.stringify({ id: made.id, source: made.source_type, seen }));
`,
    );
    const { stdout } = await run(process.execPath, ['sync.js'], {
      cwd: project,
      env: { PATH: process.env.PATH ?? '', ORGDATA_API_KEY: server.apiKey, ORGDATA_BASE_URL: server.baseUrl },
    });
    const result = JSON.parse(stdout) as { id: string; source: string; seen: string[] };
    expect(result.id).toMatch(/^con_/);
    expect(result.source).toBe('api');
    expect(result.seen).toEqual(['packed@example.com']);
  });
});
