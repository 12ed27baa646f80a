import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from './helpers/serverProcess.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');

/** The README's `sh` blocks between two headings, as written. */
function shellBlocks(from: string, to: string): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf(from), readme.indexOf(to));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/**
 * The README's quick start as a newcomer runs it: `npm start` (the built server, as `npm install`
 * leaves it), then the blocks of "Run it" and "Files in two steps" pasted into a shell, word for
 * word but for the port (3000 may be taken here) and a data directory of the test's own.
 */
describe("the README's quick start, run as written", { timeout: 180_000 }, () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-readme-'));
  let server: ReturnType<typeof spawn> | null = null;
  afterAll(() => {
    if (server?.pid) process.kill(-server.pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(path.join(ROOT, 'hello.txt'), { force: true });
  });

  it('starts, makes an organisation and a key, lists and creates a contact, uploads a file, syncs contacts', async () => {
    const [install, quickStart] = shellBlocks('## Run it', '### Files in two steps');
    const [files] = shellBlocks('### Files in two steps', '### Sync with another system');
    const [sync] = shellBlocks('### Sync with another system', '## Official client');
    expect(install!.trim().split('\n')).toEqual(['npm install', 'npm start']);

    const port = await freePort();
    const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' };
    server = spawn('npm', ['start'], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    server.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    server.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    for (let i = 0; ; i++) {
      const up = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.ok,
        () => false,
      );
      if (up) break;
      if (i > 150) throw new Error(`npm start did not come up:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }

    // The two blocks in one shell session (the second uses $KEY from the first).
    const script = `set -euo pipefail\n${quickStart}\necho\n${files}\necho\n${sync}\necho`.replaceAll(
      'localhost:3000',
      `localhost:${port}`,
    );
    const { stdout } = await run('bash', ['-c', script], { cwd: ROOT, env });
    // curl prints each answer without a newline: one JSON document after another.
    const lines = stdout.replace(/}\s*{/g, '}\n{').split('\n').filter(Boolean);
    expect(lines[0]).toMatch(/^od_live_[A-Za-z0-9]{43}$/);
    expect(JSON.parse(lines[1]!)).toMatchObject({ object: 'list', data: [], has_more: false });
    expect(JSON.parse(lines[2]!)).toMatchObject({ object: 'contact', first_name: 'Grace', email: 'grace@example.com', source_type: 'api' });
    expect(JSON.parse(lines[3]!)).toMatchObject({ object: 'file', name: 'hello.txt', status: 'ready', size: 15 });
    const batch = JSON.parse(lines[4]!);
    expect(batch.object).toBe('batch_result');
    expect(batch.data.map((item: { status: number }) => item.status)).toEqual([201, 201]);
    expect(JSON.parse(lines[5]!).data.map((c: { email: string }) => c.email)).toEqual([
      'grace@example.com',
      'ada@example.com',
      'alan@example.com',
    ]);
    expect(JSON.parse(lines[6]!)).toMatchObject({ object: 'list', data: [] });
    expect(JSON.parse(lines[7]!).data.map((c: { external_id: string }) => c.external_id)).toEqual(['crm-1']);
    expect(lines).toHaveLength(8);
  });
});
