import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEntry } from './helpers/cliEntry.js';
import { orgWithKey, serverEnv, type ServerEnv } from './helpers/serverProcess.js';

/**
 * A hostile review's find: with TLS_CERT_FILE/TLS_KEY_FILE the request's socket is a TLSSocket, whose bytesRead
 * counts decrypted bytes: it moves only when a whole TLS record (up to 16 KiB) has arrived. A body
 * that keeps arriving at a steady 4 KB/s in records of 14 KB shows no movement for 3.5 s, and
 * with BODY_IDLE_TIMEOUT_SECONDS=1 it is answered 408 while its bytes are still arriving (at the
 * default 60 s: any link slower than about 270 B/s). The raw TCP socket (tlsSocket._parent) counts
 * every byte.
 */
const IDLE_SECONDS = 1;
const ROOT = path.resolve(import.meta.dirname, '..');

describe('a body that keeps arriving over TLS', { timeout: 120_000 }, () => {
  let env: ServerEnv;
  let child: ChildProcess;
  let output = '';
  let key: string;

  beforeAll(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-tls-'));
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        `${dir}/k.pem`,
        '-out',
        `${dir}/c.pem`,
        '-days',
        '2',
        '-subj',
        '/CN=localhost',
      ],
      { stdio: 'ignore' },
    );
    env = await serverEnv('sqlite', {
      BODY_IDLE_TIMEOUT_SECONDS: String(IDLE_SECONDS),
      TLS_CERT_FILE: `${dir}/c.pem`,
      TLS_KEY_FILE: `${dir}/k.pem`,
    });
    ({ key } = await orgWithKey(env.env));
    child = spawn(process.execPath, [...cliEntry(ROOT), 'serve'], { env: env.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    const port = Number(env.env.PORT);
    for (let i = 0; i < 300; i++) {
      const up = await new Promise<boolean>((resolve) => {
        const s = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false }, () => (s.destroy(), resolve(true)));
        s.on('error', () => resolve(false));
      });
      if (up) return;
      await sleep(100);
    }
    throw new Error(`no TLS server:\n${output}`);
  }, 120_000);
  afterAll(async () => {
    child?.kill('SIGKILL');
    await env?.dispose();
  });

  it('is not cut while its bytes keep arriving at 4 KB/s', async () => {
    // A proxy that passes the client's bytes on at a steady 4 KB/s (200 bytes every 50 ms).
    const proxy = net.createServer((client) => {
      const upstream = net.connect(Number(env.env.PORT), '127.0.0.1');
      upstream.pipe(client);
      upstream.on('error', () => client.destroy());
      client.on('error', () => upstream.destroy());
      let queue = Buffer.alloc(0);
      client.on('data', (d: Buffer) => (queue = Buffer.concat([queue, d])));
      const pump = setInterval(() => {
        if (queue.length > 0) {
          upstream.write(queue.subarray(0, 200));
          queue = queue.subarray(200);
        }
      }, 50);
      client.on('close', () => (clearInterval(pump), upstream.destroy()));
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const body = JSON.stringify({
      mode: 'create',
      contacts: [0, 1].map((i) => ({ first_name: 'Tls', email: `tls-${i}-${Date.now()}@example.com`, notes: 'n'.repeat(7000) })),
    });
    const text = await new Promise<string>((resolve) => {
      let got = '';
      const socket = tls.connect(
        { port: (proxy.address() as net.AddressInfo).port, host: '127.0.0.1', rejectUnauthorized: false },
        async () => {
          socket.write(
            `POST /api/v1/contacts/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n`,
          );
          await sleep(500);
          socket.write(body); // one TLS record of about 14 KB
        },
      );
      socket.setEncoding('utf8');
      socket.on('data', (d: string) => (got += d));
      socket.on('error', () => resolve(got));
      socket.on('close', () => resolve(got));
      setTimeout(() => (socket.destroy(), resolve(got)), 20_000).unref();
    });
    proxy.close();
    expect(text.split('\r\n')[0]).toBe('HTTP/1.1 200 OK');
  });
});
