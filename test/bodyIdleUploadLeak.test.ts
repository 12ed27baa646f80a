import { readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { bigBatch } from './helpers/bigBatch.js';
import { suiteServer } from './helpers/suiteServer.js';

/**
 * A hostile review's find: the timer's 408 (Connection: close) ends the response while the upload handler is still
 * streaming request.raw into a `.part` file. Node takes the request off the connection when its
 * response finishes, so the close that follows never aborts it: request.raw emits neither 'end' nor
 * 'error' nor 'close', borrow()'s finished() never fires, and pipeline(input, meter, output) waits
 * forever, holding the write stream's file descriptor and its `.part` file.
 */
const IDLE_SECONDS = 1;

function stalledPut(url: string, size: number, sent: number): Promise<string> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname);
    let text = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (text += d));
    socket.on('error', reject);
    socket.on('close', () => resolve(text));
    socket.on('connect', () =>
      socket.write(
        `PUT ${u.pathname} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${size}\r\n\r\n${'a'.repeat(sent)}`,
      ),
    );
    setTimeout(() => socket.destroy(), 15_000).unref();
  });
}

describe('an upload the body timer cut', { timeout: 120_000 }, () => {
  const suite = suiteServer('sqlite', { BODY_IDLE_TIMEOUT_SECONDS: String(IDLE_SECONDS) }, { org: true, stopWith: 'SIGKILL' });

  const partFds = () => {
    const dir = `/proc/${suite.server.child.pid}/fd`;
    let n = 0;
    for (const fd of readdirSync(dir)) {
      try {
        if (readlinkSync(path.join(dir, fd)).endsWith('.part')) n++;
      } catch {
        // closed meanwhile
      }
    }
    return n;
  };
  const partFiles = () => {
    try {
      return readdirSync(path.join(suite.env.env.DATA_DIR!, 'files', 'tmp')).filter((f) => f.endsWith('.part')).length;
    } catch {
      return 0;
    }
  };

  it('leaves no open .part file descriptor (nor .part file) behind its 408', async () => {
    const size = 100_000;
    const res = await fetch(`${suite.url}/api/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'leak.txt', content_type: 'text/plain', size }),
    });
    expect(res.status).toBe(201);
    const { upload_url } = (await res.json()) as { upload_url: string };
    // Ten stalled uploads of the same link, each answered 408 and closed.
    const answers = await Promise.all(Array.from({ length: 10 }, () => stalledPut(upload_url, size, 1000)));
    for (const text of answers) expect(text).toMatch(/^HTTP\/1\.1 408/);
    await sleep(IDLE_SECONDS * 3000);
    expect({ fds: partFds(), files: partFiles() }).toEqual({ fds: 0, files: 0 });
  });

  it('logs no error when it closes a cut upload whose client reads nothing', async () => {
    // The 408 is queued behind answers the client never reads, so the answered rule destroys the
    // connection a timeout later; the upload's pipeline then fails on the aborted request and the
    // handler rejects after its reply was sent: Fastify logs 'Promise errored, but reply.sent =
    // true was set' at level error, once per such connection (a client-driven error-log flood).
    const seeded = await fetch(`${suite.url}/api/v1/contacts/batch`, {
      method: 'POST',
      headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json' },
      body: bigBatch(`big-${Date.now()}`),
    });
    expect(seeded.status).toBe(200);
    const size = 100_000;
    const res = await fetch(`${suite.url}/api/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'unread.txt', content_type: 'text/plain', size }),
    });
    const { upload_url } = (await res.json()) as { upload_url: string };
    const u = new URL(upload_url);
    const before = suite.server.output().length;
    const socket = net.connect(Number(u.port), u.hostname);
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.on('connect', resolve));
    socket.pause();
    socket.write(
      `GET /api/v1/contacts?limit=100 HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer ${suite.org.key}\r\n\r\n`.repeat(10) +
        `PUT ${u.pathname} HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: ${size}\r\n\r\n${'a'.repeat(1000)}`,
    );
    await sleep(IDLE_SECONDS * 6000);
    socket.destroy();
    await sleep(500);
    const errors = suite.server
      .output()
      .slice(before)
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { level: number; msg: string })
      .filter((line) => line.level >= 40);
    expect(errors.map((e) => `${e.level} ${e.msg}`)).toEqual([]);
  });
});
