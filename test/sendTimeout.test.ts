import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cliEntry } from './helpers/cliEntry.js';
import { serverEnv, type ServerEnv } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';

/**
 * A hostile review's find: a client that reads none of its answers held its connection and the
 * answers queued for it for ever, without an API key (20 connections × 40 pipelined GETs of the
 * public openapi.json took a server from 178 MB to 456 MB; Node's request and headers timeouts
 * cover requests, and the keep-alive timeout starts only once the answers are written). Now a
 * connection whose queued answers have not moved toward the client for SEND_TIMEOUT_SECONDS is
 * closed. A client that takes its answers slowly but steadily keeps its connection, and a
 * keep-alive connection that reads what it is sent is never touched. Real server processes,
 * SEND_TIMEOUT_SECONDS=4, over HTTP and over TLS (where the bytes counted are the TCP socket's).
 *
 * The steady reader takes 64 KB every 40 ms (1.6 MB/s): on loopback, Linux wakes a writer only once
 * about a third of its send buffer (grown to 4 MiB) is free, so what a reader takes shows in the
 * server in steps of about 1.4 MB; slower readers are steady for longer timeouts (60 s by default:
 * about 23 KB/s on loopback, less on a real network, whose send buffers are smaller).
 */
const SEND_SECONDS = 4;
const ROOT = path.resolve(import.meta.dirname, '..');
const OPENAPI = (host: string) => `GET /api/v1/openapi.json HTTP/1.1\r\nHost: ${host}\r\n\r\n`;

type Connect = () => Promise<net.Socket>;

/** Counts the whole answers (status, Content-Length) a connection received, without keeping their bytes. */
class Answers {
  readonly statuses: number[] = [];
  private head = '';
  private bodyLeft = 0;

  push(chunk: Buffer): void {
    let at = 0;
    while (at < chunk.length) {
      if (this.bodyLeft > 0) {
        const take = Math.min(this.bodyLeft, chunk.length - at);
        this.bodyLeft -= take;
        at += take;
        continue;
      }
      const before = this.head.length;
      this.head += chunk.toString('latin1', at);
      const end = this.head.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = this.head.slice(0, end);
      at += end + 4 - before;
      this.head = '';
      this.statuses.push(Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]));
      const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1];
      if (length === undefined) throw new Error(`an answer without Content-Length:\n${head}`);
      this.bodyLeft = Number(length);
    }
  }

  /** Answers received whole. */
  get complete(): number {
    return this.statuses.length - (this.bodyLeft > 0 ? 1 : 0);
  }
}

/** Resolves when `socket` closes (the server closed it: the client never does before the end). */
const closed = (socket: net.Socket) => new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));

/**
 * The three cases against one server. `connect` opens a connection (plain TCP or TLS); `output`
 * is what the server printed (LOG_LEVEL=info), for the log line of each cut connection.
 */
function sendTimeoutCases(connect: Connect, output: () => string, host: string): void {
  it('closes connections whose pipelined answers are never read, SEND_TIMEOUT_SECONDS after they stop moving', async () => {
    const connections = 8;
    const gets = 40; // about 9 MB each (openapi.json is about 235 KB as served), 4 MB at most in the kernel's buffers
    const sockets = await Promise.all(Array.from({ length: connections }, () => connect()));
    const sent = Date.now();
    for (const socket of sockets) {
      socket.pause(); // reads nothing: the answers pile up in the server
      socket.write(OPENAPI(host).repeat(gets));
    }
    // A paused socket sees no close, and a byte sent to learn of one would be refused for itself
    // (over TLS Node destroys a connection that sends while its answers wait, HPE_PAUSED): the
    // server's log line of each cut says when. Waits 30 s at most: the cut is due SEND_SECONDS
    // after the output stopped, checked every second.
    const cutAt = () => [...output().matchAll(/"time":(\d+)[^\n]*its answers have not moved/g)].map((m) => Number(m[1]));
    for (let i = 0; i < 300 && cutAt().length < connections; i++) await sleep(100);
    // Each client, reading now, gets what its kernel still held, then the reset: never all its answers.
    const ends = await Promise.all(
      sockets.map((socket) => {
        const answers = new Answers();
        socket.on('data', (chunk: Buffer) => answers.push(chunk));
        socket.resume();
        return Promise.race([
          closed(socket).then(() => `closed after ${answers.complete} answers`),
          sleep(20_000).then(() => `open after ${answers.complete} answers`),
        ]);
      }),
    );
    for (const socket of sockets) socket.destroy();
    expect(ends.filter((end) => !end.startsWith('closed') || end === `closed after ${gets} answers`)).toEqual([]);
    // Each closed once, logged at info, never before the timeout (nothing moved from the start).
    const cuts = cutAt();
    expect(cuts.length).toBe(connections);
    for (const at of cuts) expect(at - sent).toBeGreaterThanOrEqual(SEND_SECONDS * 1000 - 100);
  });

  it('keeps a connection whose client reads its answers slowly but steadily', async () => {
    const socket = await connect();
    const answers = new Answers();
    let closedByServer = false;
    socket.once('close', () => (closedByServer = true));
    socket.pause();
    const gets = 80; // about 19 MB: about 12 s at this reader's pace, three timeouts
    socket.write(OPENAPI(host).repeat(gets));
    // 64 KB every 40 ms, far slower than the server writes.
    const reader = setInterval(() => {
      for (let taken = 0; taken < 65_536 && socket.readableLength > 0;) {
        const chunk = socket.read(Math.min(65_536 - taken, socket.readableLength)) as Buffer | null;
        if (chunk === null) break;
        answers.push(chunk);
        taken += chunk.length;
      }
    }, 40);
    for (let i = 0; i < 1200 && answers.complete < gets && !closedByServer; i++) await sleep(100);
    clearInterval(reader);
    socket.destroy();
    expect({ closedByServer, complete: answers.complete }).toEqual({ closedByServer: false, complete: gets });
    expect(new Set(answers.statuses)).toEqual(new Set([200]));
  });

  it('never touches a keep-alive connection that reads what it is sent', async () => {
    const socket = await connect();
    const answers = new Answers();
    let closedByServer = false;
    socket.once('close', () => (closedByServer = true));
    socket.on('data', (chunk: Buffer) => answers.push(chunk));
    const wait = async (count: number) => {
      for (let i = 0; i < 300 && answers.complete < count; i++) await sleep(100);
    };
    socket.write(OPENAPI(host).repeat(3));
    await wait(3);
    await sleep((SEND_SECONDS + 3) * 1000); // idle, past the timeout and two checks
    socket.write(OPENAPI(host));
    await wait(4);
    socket.destroy();
    expect({ closedByServer, complete: answers.complete }).toEqual({ closedByServer: false, complete: 4 });
  });
}

describe('answers nobody reads (HTTP)', { timeout: 120_000 }, () => {
  const suite = suiteServer('sqlite', { SEND_TIMEOUT_SECONDS: String(SEND_SECONDS), LOG_LEVEL: 'info' }, { stopWith: 'SIGKILL' });

  const connect: Connect = () =>
    new Promise((resolve, reject) => {
      const socket = net.connect(Number(suite.env.env.PORT), '127.0.0.1', () => resolve(socket));
      socket.on('error', reject); // a reset is seen as the close that follows
    });
  sendTimeoutCases(connect, () => suite.server.output(), 'a');

  it('still serves after closing them', async () => {
    expect((await fetch(`${suite.url}/healthz`)).status).toBe(200);
  });
});

describe('answers nobody reads (TLS)', { timeout: 120_000 }, () => {
  let env: ServerEnv;
  let child: ChildProcess;
  let output = '';

  beforeAll(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'orgdata-tls-'));
    // prettier-ignore
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
      '-keyout', `${dir}/k.pem`, '-out', `${dir}/c.pem`, '-days', '2', '-subj', '/CN=localhost'], { stdio: 'ignore' });
    env = await serverEnv('sqlite', {
      SEND_TIMEOUT_SECONDS: String(SEND_SECONDS),
      LOG_LEVEL: 'info',
      TLS_CERT_FILE: `${dir}/c.pem`,
      TLS_KEY_FILE: `${dir}/k.pem`,
    });
    child = spawn(process.execPath, [...cliEntry(ROOT), 'serve'], { env: env.env, stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
    for (let i = 0; i < 300; i++) {
      const up = await connect().then(
        (socket) => (socket.destroy(), true),
        () => false,
      );
      if (up) return;
      await sleep(100);
    }
    throw new Error(`no TLS server:\n${output}`);
  }, 120_000);
  afterAll(async () => {
    child?.kill('SIGKILL');
    await env?.dispose();
  });

  const connect: Connect = () =>
    new Promise((resolve, reject) => {
      const socket = tls.connect({ port: Number(env.env.PORT), host: '127.0.0.1', rejectUnauthorized: false }, () => resolve(socket));
      socket.on('error', reject); // a reset is seen as the close that follows
    });
  sendTimeoutCases(connect, () => output, 'localhost');
});
