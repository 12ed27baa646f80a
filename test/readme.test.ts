import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from './helpers/serverProcess.js';
import { fetchSignIn } from './helpers/signInForm.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');

/** The README's `sh` blocks between two headings, as written. */
function shellBlocks(from: string, to: string): string[] {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf(from), readme.indexOf(to));
  return [...section.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** The repository's status, ignored files included (a file the quick start left would show, ignored or not). */
async function repoStatus(): Promise<string[]> {
  const { stdout } = await run('git', ['status', '--porcelain', '--ignored'], { cwd: ROOT });
  // artifacts/ holds the screenshots of the browser suites, which may be running beside this one.
  return stdout
    .split('\n')
    .filter(Boolean)
    .filter((line) => !line.slice(3).startsWith('artifacts/'));
}

/**
 * The README's quick start as a newcomer runs it: `npm start` (the built server, as `npm install`
 * leaves it), then the blocks of "Run it", "Files in two steps" and "Sync with another system"
 * pasted into a shell, word for word but for the port (3000 may be taken here) and a data
 * directory of the test's own. `org create` asks for the admin's password: here it comes on
 * standard input, as from a script (a terminal's prompt is tested in cliOperator.test.ts).
 */
describe("the README's quick start, run as written", { timeout: 180_000 }, () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'orgdata-readme-'));
  let server: ReturnType<typeof spawn> | null = null;
  afterAll(() => {
    if (server?.pid) process.kill(-server.pid, 'SIGKILL');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('starts, makes an organisation and a key, lists and creates a contact, uploads a file, syncs contacts, and leaves no file behind', async () => {
    const [install, makeOrg, quickStart] = shellBlocks('## Run it', '### Files in two steps');
    const [files] = shellBlocks('### Files in two steps', '### Sync with another system');
    const [sync] = shellBlocks('### Sync with another system', '## Official client');
    expect(install!.trim().split('\n')).toEqual(['npm install', 'npm start']);
    // The password is asked for, never an argument of the quick start.
    for (const block of [makeOrg!, quickStart!, files!, sync!]) expect(block).not.toMatch(/--(admin-)?password/);
    expect(makeOrg!.trim().split('\n')).toHaveLength(1);
    const before = await repoStatus();

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

    // The blocks in one shell session (the later ones use $ORG and $KEY), the password on its standard input.
    const script = `set -euo pipefail\n${makeOrg}\n${quickStart}\necho\n${files}\necho\n${sync}\necho`.replaceAll(
      'localhost:3000',
      `localhost:${port}`,
    );
    const shell = spawn('bash', ['-c', script], { cwd: ROOT, env });
    let stdout = '';
    let stderr = '';
    shell.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    shell.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    shell.stdin.end('a long passphrase\n');
    const code = await new Promise((resolve) => shell.on('close', resolve));
    expect(code, stderr).toBe(0);
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

    // The admin signs in to the dashboard with the password given on standard input.
    const signIn = await fetchSignIn(`http://127.0.0.1:${port}`, { email: 'ada@example.com', password: 'a long passphrase' });
    expect(signIn.status).toBe(303);

    // Nothing new in the repository, not even an ignored file: the quick start writes nowhere but DATA_DIR.
    expect(await repoStatus()).toEqual(before);
  });
});
