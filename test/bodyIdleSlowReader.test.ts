import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { bigBatch } from './helpers/bigBatch.js';
import { orgWithKey } from './helpers/serverProcess.js';
import { suiteServer } from './helpers/suiteServer.js';

/**
 * Node stops reading a connection while the answers to pipelined requests wait to be written
 * (socket.pause(): the client has not yet taken what is queued). A client that takes its answers
 * slowly but steadily is not stalling, and neither is the body it sent whole behind them: the
 * server, not the client, is holding it. A hostile review's find: such a body was answered 408
 * "send it again" (the paused socket with answers waiting to be taken counted as the client's
 * stall), and the connection was then destroyed in the middle of the answers it was downloading.
 * A real server process, BODY_IDLE_TIMEOUT_SECONDS=1.
 */
const IDLE_SECONDS = 1;
/** The client's reading speed: the answers below take it several idle timeouts. */
const BYTES_PER_SECOND = 400_000;

describe('a client reading its pipelined answers slowly', { timeout: 120_000 }, () => {
  const suite = suiteServer('sqlite', { BODY_IDLE_TIMEOUT_SECONDS: String(IDLE_SECONDS) }, { stopWith: 'SIGKILL' });

  it('gets every answer, its body sent whole behind them included, on one connection', async () => {
    const { key } = await orgWithKey(suite.env.env);
    // 100 contacts of 7 KB: a page of them is an answer of about 730 KB.
    const seeded = await fetch(`${suite.url}/api/v1/contacts/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: bigBatch(`seed-${Date.now()}`),
    });
    expect(seeded.status).toBe(200);

    const { port } = new URL(suite.url);
    const socket = net.connect(Number(port), '127.0.0.1');
    socket.on('error', () => undefined);
    let closed = false;
    socket.on('close', () => (closed = true));
    await new Promise((resolve) => socket.on('connect', resolve));
    // Reads about BYTES_PER_SECOND: each chunk is followed by the pause it is worth.
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      socket.pause();
      setTimeout(() => socket.resume(), (chunk.length / BYTES_PER_SECOND) * 1000);
    });
    const gets = 6;
    socket.write(`GET /api/v1/contacts?limit=100 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\n\r\n`.repeat(gets));
    await sleep(50);
    const body = bigBatch(`behind-${Date.now()}`);
    socket.write(
      `POST /api/v1/contacts/batch HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    const statuses = () =>
      [
        ...Buffer.concat(chunks)
          .toString('latin1')
          .matchAll(/HTTP\/1\.1 (\d{3})/g),
      ].map((m) => Number(m[1]));
    for (let i = 0; i < 600 && statuses().length < gets + 1 && !closed; i++) await sleep(100);
    const text = Buffer.concat(chunks).toString('latin1');
    const last = text.lastIndexOf('HTTP/1.1');
    socket.destroy();
    expect(statuses(), text.slice(last, last + 400)).toEqual([...Array.from({ length: gets }, () => 200), 200]);
  });
});
