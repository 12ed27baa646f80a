import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cutStalledBodies } from '../src/http/bodyTimeout.js';

/**
 * The body timer's tick runs in the event loop's timers phase, before the poll that reads the
 * sockets. A block of the loop shorter than a late tick's (not two ticks) could hide a byte the
 * client sent in time, still unread in the kernel when the tick looks: a body moving every 990 ms
 * was cut with a 1 s timeout behind a 270 ms block (a hostile review's find). The timer on a bare
 * Fastify app in this process, so that the test blocks the server's loop itself, exactly when it
 * means to: in a setImmediate, so that the next loop's timers run before its poll.
 */
const IDLE_SECONDS = 1;

function busyWait(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

describe('a body that keeps arriving while the event loop is briefly blocked', () => {
  let app: FastifyInstance;
  let port: number;

  beforeAll(async () => {
    app = Fastify();
    cutStalledBodies(app, IDLE_SECONDS);
    app.post('/echo', async (request) => ({ got: request.body }));
    await app.listen({ port: 0, host: '127.0.0.1' });
    port = (app.server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await app.close();
  });

  it('is not cut: a byte waiting in the kernel counts once the loop has read it', { timeout: 30_000 }, async () => {
    const body = JSON.stringify({ t: 'ab' });
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (data: string) => (text += data));
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.on('connect', resolve));
    socket.write(`POST /echo HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
    // Two bytes every cycle: one on a free loop, one 990 ms later that the loop, blocked for 270 ms
    // (over one tick of 250 ms, under two), reads only after the tick due meanwhile has run. Its
    // body has then been unread for over the timeout by the timer's count, though its client never
    // paused that long.
    let sent = 0;
    while (sent < body.length && !text.includes('HTTP/1.1')) {
      socket.write(body.charAt(sent++));
      await sleep(990);
      await new Promise((resolve) => setImmediate(resolve));
      if (sent < body.length) socket.write(body.charAt(sent++));
      busyWait(270);
      await sleep(200);
    }
    for (let i = 0; i < 20 && !text.includes('\r\n\r\n'); i++) await sleep(50);
    socket.destroy();
    expect(text.split('\r\n')[0], text).toBe('HTTP/1.1 200 OK');
    expect(text).toContain('"got":{"t":"ab"}');
  });
});
