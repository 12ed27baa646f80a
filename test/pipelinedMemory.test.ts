import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { suiteServer } from './helpers/suiteServer.js';
import { rssMb, trickleRead } from './helpers/trickleReader.js';

/**
 * Review 9: SEND_TIMEOUT_SECONDS bounds how long a client that reads NOTHING holds its queued
 * answers, not how much memory its pipelined requests make the server allocate, nor how long a
 * client that reads just fast enough holds it. Each GET of the public openapi.json serializes the
 * ~235 KB document again; one 64 KB packet of ~1,400 pipelined GETs (no key) is parsed in one go
 * and every answer is made before a byte is written.
 */
const SEND_SECONDS = 4;
const OPENAPI = 'GET /api/v1/openapi.json HTTP/1.1\r\nHost: a\r\n\r\n';

describe('pipelined answers: memory', { timeout: 120_000 }, () => {
  // A server of its own for each case: RSS a freed heap leaves behind would hide the next one's.
  const suite = suiteServer('sqlite', { SEND_TIMEOUT_SECONDS: String(SEND_SECONDS) }, { perTest: true, stopWith: 'SIGKILL' });
  const connect = () =>
    new Promise<net.Socket>((resolve, reject) => {
      const socket = net.connect(Number(suite.env.env.PORT), '127.0.0.1', () => resolve(socket));
      socket.on('error', () => {});
      socket.once('error', reject);
    });
  /** Lets the server settle, and a GC run, so that RSS is a baseline. */
  const settle = async () => {
    for (let i = 0; i < 3; i++) await fetch(`${suite.url}/api/v1/openapi.json`).then((r) => r.arrayBuffer());
    await sleep(2000);
    return rssMb(suite.server.child.pid!);
  };

  it('one 64 KB packet of pipelined GETs (no key) does not make the server allocate hundreds of MB', async () => {
    const base = await settle();
    const socket = await connect();
    socket.pause();
    socket.write(OPENAPI.repeat(1400)); // 64,400 bytes: one read
    let peak = base;
    for (let i = 0; i < 60; i++) {
      peak = Math.max(peak, rssMb(suite.server.child.pid!));
      await sleep(50);
    }
    socket.destroy();
    expect(Math.round(peak - base)).toBeLessThan(100);
  });

  it('a client that takes its answers just fast enough does not keep them queued for many timeouts', async () => {
    const base = await settle();
    const socket = await connect();
    socket.pause();
    socket.write(OPENAPI.repeat(400)); // ~94 MB of answers
    let closed = false;
    socket.once('close', () => (closed = true));
    // 512 KB a second: on loopback the server sees a step of ~1.4 MB (a third of the send buffer)
    // every ~3 s, inside SEND_TIMEOUT_SECONDS=4. With the default 60 s that is ~23 KB/s; on a real
    // link, whose send buffer is smaller, a few KB/s.
    const stopReading = trickleRead([socket]);
    await sleep(8 * SEND_SECONDS * 1000);
    const held = rssMb(suite.server.child.pid!) - base;
    stopReading();
    socket.destroy();
    // Either the connection was closed (its answers freed) or what it holds is small.
    expect({ closed, heldMbOver50: held > 50, held: Math.round(held) }).toMatchObject({ heldMbOver50: false });
  });
});
