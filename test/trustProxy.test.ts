import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../src/config.js';
import { loadConfig } from '../src/config/load.js';
import { makeHarness, type Harness, type Org } from './helpers/harness.js';
import { postSignIn } from './helpers/signInForm.js';
import { serverEnv } from './helpers/serverProcess.js';
import { cliEntry } from './helpers/cliEntry.js';

// IDENTITY.md rule 20: TRUST_PROXY=true (trust every hop) let a client choose the address that
// throttles and Activity see, by writing its own X-Forwarded-For. The server refuses it at start;
// a hop count or the proxies' addresses take its place.
const load = (value: string) => loadConfig({ DATA_DIR: '/tmp/orgdata-trust-proxy-test', SECRET_KEY: 'x'.repeat(32), TRUST_PROXY: value });

describe('TRUST_PROXY', () => {
  it('refuses true, and any range that holds every address, naming what to set instead', () => {
    for (const value of ['true', 'TRUE', ' true ', '0.0.0.0/0', '::/0', '10.0.0.1,0.0.0.0/0']) {
      expect(() => load(value), value).toThrow(ConfigError);
      expect(() => load(value), value).toThrow(/TRUST_PROXY.*(addresses|CIDRs).*hop count/s);
    }
  });

  it('takes a hop count (an integer of at least 1) or a list of addresses and CIDRs', () => {
    expect(load('1').trustProxy).toBe(1);
    expect(load('2').trustProxy).toBe(2);
    expect(load('127.0.0.1').trustProxy).toBe('127.0.0.1');
    expect(load('10.0.0.0/8, 172.30.80.10,::1,fd00::/8').trustProxy).toBe('10.0.0.0/8,172.30.80.10,::1,fd00::/8');
    expect(load('false').trustProxy).toBe(false);
    expect(load('').trustProxy).toBe(false);
    for (const value of ['0', '-1', '1.5', '99999', '10.0.0.0/33', '300.1.1.1', 'proxy.example', '10.0.0.1,,']) {
      expect(() => load(value), value).toThrow(/TRUST_PROXY/);
    }
  });

  it('stops the server at start with that message', { timeout: 60_000 }, async () => {
    const env = await serverEnv('sqlite', { TRUST_PROXY: 'true' });
    try {
      const child = spawn(process.execPath, [...cliEntry(path.resolve(import.meta.dirname, '..')), 'serve'], {
        env: env.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      // Before the rule, the server started and served: stop it then, and fail.
      const started = setTimeout(() => child.kill('SIGKILL'), 30_000);
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      clearTimeout(started);
      expect(code).not.toBe(0);
      expect(output).toContain('TRUST_PROXY');
      expect(output).toMatch(/hop count/);
      await expect(fetch(`${env.url}/healthz`)).rejects.toThrow();
    } finally {
      await env.dispose();
    }
  });
});

describe('TRUST_PROXY=1 behind one proxy', () => {
  let h: Harness;
  let org: Org;
  beforeAll(async () => {
    h = await makeHarness('sqlite', { env: { TRUST_PROXY: '1' } });
    org = await h.newOrg('Proxied Org');
  });
  afterAll(() => h.close());

  it('takes the address the proxy saw, not one the client wrote: 60 guesses with chosen addresses are throttled', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 60; i++) {
      // The client writes its own X-Forwarded-For; the proxy (10.0.0.2) appends what it saw.
      const chosen = `192.0.2.${i + 1}`;
      const res = await postSignIn(
        h.app,
        { email: org.adminEmail, password: 'wrong password' },
        { remoteAddress: '10.0.0.2', headers: { 'x-forwarded-for': `${chosen}, 203.0.113.66` } },
      );
      statuses.push(res.statusCode);
    }
    expect(statuses).toContain(429);
    expect(statuses.filter((status) => status === 401).length).toBeLessThan(60);
  });

  it('records the address the proxy saw in Activity, not the chosen one', async () => {
    const other = await h.newOrg('Proxied Origin Org');
    const res = await postSignIn(
      h.app,
      { email: other.adminEmail, password: 'correct horse battery' },
      { remoteAddress: '10.0.0.2', headers: { 'x-forwarded-for': '192.0.2.200, 198.51.100.77' } },
    );
    expect(res.statusCode).toBe(303);
    const rows = await h.db.kysely
      .selectFrom('events')
      .selectAll()
      .where('org_id', '=', other.orgId)
      .where('type', '=', 'member.signed_in')
      .execute();
    expect(rows).toHaveLength(1);
    const text = JSON.stringify(rows);
    expect(text).toContain('198.51.100');
    expect(text).not.toContain('192.0.2');
  });
});
