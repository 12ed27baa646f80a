import http from 'node:http';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { suiteServer } from './helpers/suiteServer.js';
import { fetchSignIn } from './helpers/signInForm.js';

/**
 * A request body that stops arriving is cut after BODY_IDLE_TIMEOUT_SECONDS (here 2) with 408
 * `request_timeout` and its connection closed (it used to hold the connection for
 * REQUEST_TIMEOUT_SECONDS, 300 by default); a slow body that keeps arriving is not cut. Through a
 * real server process, for a JSON body, an upload's raw body and the dashboard's multipart import.
 */
const IDLE_SECONDS = 2;
/** Generous: the idle timeout plus scheduling on a busy machine, far below REQUEST_TIMEOUT_SECONDS. */
const BOUND_MS = 8_000;

interface Sent {
  status: number | undefined;
  headers: http.IncomingHttpHeaders;
  body: string;
  ms: number;
  /** The connection was closed by the server after the answer. */
  closed: boolean;
}

/**
 * Sends the head and `parts` of a body, `pauseMs` between parts; `stall` leaves the rest unsent.
 * Resolves with the answer once the server closes the connection (or after the response, when it
 * keeps it open).
 */
function send(
  url: string,
  options: { method: string; headers: Record<string, string>; parts: (string | Buffer)[]; pauseMs: number; stall: boolean },
): Promise<Sent> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: options.method, headers: options.headers, agent: false });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const answer = {
          status: res.statusCode,
          headers: res.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          ms: Date.now() - started,
        };
        if (!options.stall) return resolve({ ...answer, closed: false });
        const socket = req.socket;
        if (!socket || socket.destroyed) return resolve({ ...answer, closed: true });
        socket.once('close', () => resolve({ ...answer, closed: true }));
        setTimeout(() => resolve({ ...answer, closed: false }), 3000).unref();
      });
    });
    void (async () => {
      for (const [i, part] of options.parts.entries()) {
        if (i > 0) await sleep(options.pauseMs);
        if (req.destroyed) return;
        req.write(part);
      }
      if (!options.stall) req.end();
    })();
  });
}

/**
 * Writes `chunks` on one raw connection, `pauseMs` apart, and resolves with everything the server
 * sent and when it closed the connection (or null after `waitMs`).
 */
function rawExchange(
  url: string,
  chunks: string[],
  pauseMs: number,
  waitMs: number,
): Promise<{ text: string; closedAfterMs: number | null }> {
  const { hostname, port } = new URL(url);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let text = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (text += chunk));
    socket.on('error', reject);
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closedAfterMs: null });
    }, waitMs);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closedAfterMs: Date.now() - started });
    });
    socket.on('connect', () => {
      void (async () => {
        for (const [i, chunk] of chunks.entries()) {
          if (i > 0) await sleep(pauseMs);
          if (socket.destroyed) return;
          socket.write(chunk);
        }
      })();
    });
  });
}

describe('a request body that stops arriving', { timeout: 120_000 }, () => {
  const suite = suiteServer('sqlite', { BODY_IDLE_TIMEOUT_SECONDS: String(IDLE_SECONDS) }, { org: true, stopWith: 'SIGKILL' });

  const api = (path: string, init: RequestInit = {}) =>
    fetch(`${suite.url}/api/v1${path}`, {
      ...init,
      headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json', ...init.headers },
    });

  it('answers a stalled JSON body 408 request_timeout within the idle timeout, closes the connection, and writes nothing', async () => {
    const body = JSON.stringify({ first_name: 'Stalled', email: 'stalled@example.com' });
    const sent = await send(`${suite.url}/api/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json', 'content-length': String(body.length) },
      parts: [body.slice(0, 10)],
      pauseMs: 0,
      stall: true,
    });
    expect(sent.status).toBe(408);
    expect(sent.ms).toBeGreaterThanOrEqual(IDLE_SECONDS * 1000 - 100);
    expect(sent.ms).toBeLessThan(BOUND_MS);
    expect(sent.headers['content-type']).toContain('application/problem+json');
    expect(sent.headers.connection).toBe('close');
    expect(JSON.parse(sent.body)).toMatchObject({ status: 408, code: 'request_timeout' });
    expect(sent.closed).toBe(true);
    expect(((await (await api('/contacts?email=stalled@example.com')).json()) as { data: unknown[] }).data).toEqual([]);
  });

  it('takes a slow JSON body that keeps arriving, longer in all than the idle timeout', async () => {
    const body = JSON.stringify({ first_name: 'Slow', email: 'slow@example.com' });
    const parts = body.match(/.{1,6}/g)!;
    const sent = await send(`${suite.url}/api/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json', 'content-length': String(body.length) },
      parts,
      pauseMs: 600,
      stall: false,
    });
    expect(sent.ms).toBeGreaterThan(IDLE_SECONDS * 1000);
    expect(sent.status, sent.body).toBe(201);
  });

  it('cuts a stalled upload, keeps the file pending, and takes the same upload again; a slow upload goes through', async () => {
    const bytes = Buffer.alloc(20_000, 'a');
    const reserve = async () => {
      const res = await api('/files', {
        method: 'POST',
        body: JSON.stringify({ name: 'slow.txt', content_type: 'text/plain', size: bytes.length }),
      });
      expect(res.status).toBe(201);
      return (await res.json()) as { id: string; upload_url: string };
    };
    const put = (url: string, parts: Buffer[], pauseMs: number, stall: boolean) =>
      send(url, {
        method: 'PUT',
        headers: { 'content-type': 'text/plain', 'content-length': String(bytes.length) },
        parts,
        pauseMs,
        stall,
      });

    const file = await reserve();
    const stalled = await put(file.upload_url, [bytes.subarray(0, 5_000)], 0, true);
    expect(stalled.status).toBe(408);
    expect(stalled.ms).toBeLessThan(BOUND_MS);
    expect(JSON.parse(stalled.body)).toMatchObject({ code: 'request_timeout' });
    expect(stalled.closed).toBe(true);
    expect(((await (await api(`/files/${file.id}`)).json()) as { status: string }).status).toBe('pending');
    const again = await put(file.upload_url, [bytes], 0, false);
    expect(again.status, again.body).toBe(200);

    const slow = await reserve();
    const chunks = Array.from({ length: 5 }, (_, i) => bytes.subarray(i * 4_000, (i + 1) * 4_000));
    const sent = await put(slow.upload_url, chunks, 900, false);
    expect(sent.ms).toBeGreaterThan(IDLE_SECONDS * 1000);
    expect(sent.status, sent.body).toBe(200);
  });

  it('answers the dashboard’s stalled CSV import with a 408 page', async () => {
    const signIn = await fetchSignIn(suite.url, { email: suite.org.email, password: suite.org.password });
    expect(signIn.status).toBe(303);
    const cookie = signIn.headers
      .getSetCookie()
      .map((c) => c.split(';')[0])
      .join('; ');
    const form = await (await fetch(`${suite.url}/import`, { headers: { cookie } })).text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(form)![1]!;
    const boundary = 'StalledBoundary';
    const head =
      `--${boundary}\r\nContent-Disposition: form-data; name="_csrf"\r\n\r\n${csrf}\r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="people.csv"\r\nContent-Type: text/csv\r\n\r\n` +
      'first_name,email\nAda,ada@example.com\n';
    const sent = await send(`${suite.url}/import`, {
      method: 'POST',
      headers: {
        cookie,
        accept: 'text/html',
        'content-type': `multipart/form-data; boundary=${boundary}`,
        'content-length': String(head.length + 500),
      },
      parts: [head],
      pauseMs: 0,
      stall: true,
    });
    expect(sent.status).toBe(408);
    expect(sent.ms).toBeLessThan(BOUND_MS);
    expect(sent.headers['content-type']).toContain('text/html');
    expect(sent.body).toContain('The upload stopped');
    expect(sent.closed).toBe(true);
  });

  it('cuts a body that stalls on a kept-alive connection after a whole request on it', async () => {
    const host = new URL(suite.url).host;
    const whole = JSON.stringify({ first_name: 'First', email: 'first-on-socket@example.com' });
    const stalled = JSON.stringify({ first_name: 'Second', email: 'second-on-socket@example.com' });
    const head = (length: number) =>
      `POST /api/v1/contacts HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer ${suite.org.key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    const started = Date.now();
    const { text, closedAfterMs } = await rawExchange(
      suite.url,
      [head(Buffer.byteLength(whole)) + whole, head(Buffer.byteLength(stalled)) + stalled.slice(0, 8)],
      500,
      BOUND_MS + 2_000,
    );
    const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
    expect(statuses).toEqual([201, 408]);
    expect(text).toContain('request_timeout');
    expect(closedAfterMs).not.toBeNull();
    // The second body's wait started when it arrived, half a second in: not cut before it idled.
    expect(closedAfterMs!).toBeGreaterThanOrEqual(500 + IDLE_SECONDS * 1000 - 100);
    expect(closedAfterMs!).toBeLessThan(BOUND_MS);
    expect(Date.now() - started).toBeLessThan(BOUND_MS + 2_000);
    expect(((await (await api('/contacts?email=second-on-socket@example.com')).json()) as { data: unknown[] }).data).toEqual([]);
  });

  it('cuts many stalled bodies at once, each within the bound, beside slow ones that keep arriving', async () => {
    const body = (i: number) => JSON.stringify({ first_name: `Crowd ${i}`, email: `crowd-${i}@example.com` });
    const request = (i: number, length: number) =>
      `POST /api/v1/contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${suite.org.key}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`;
    const stalled = Array.from({ length: 12 }, (_, i) =>
      rawExchange(suite.url, [request(i, Buffer.byteLength(body(i))) + body(i).slice(0, 5)], 0, BOUND_MS + 2_000),
    );
    const slow = Array.from({ length: 3 }, (_, j) => {
      const i = 100 + j;
      const text = body(i);
      const parts = [request(i, Buffer.byteLength(text)), ...text.match(/.{1,8}/g)!];
      return rawExchange(suite.url, parts, 700, 30_000);
    });
    for (const { text, closedAfterMs } of await Promise.all(stalled)) {
      expect(text).toMatch(/^HTTP\/1\.1 408/);
      expect(closedAfterMs).not.toBeNull();
      expect(closedAfterMs!).toBeGreaterThanOrEqual(IDLE_SECONDS * 1000 - 100);
      expect(closedAfterMs!).toBeLessThan(BOUND_MS);
    }
    for (const { text } of await Promise.all(slow)) expect(text).toMatch(/^HTTP\/1\.1 201/);
  });

  it('closes the connection of a body that stalls after its request was already answered (a bad key)', async () => {
    const { text, closedAfterMs } = await rawExchange(
      suite.url,
      [
        'POST /api/v1/contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer od_live_wrong\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"first',
      ],
      0,
      BOUND_MS + 2_000,
    );
    expect(text).toMatch(/^HTTP\/1\.1 401/);
    expect(closedAfterMs).not.toBeNull();
    expect(closedAfterMs!).toBeLessThan(BOUND_MS);
  });

  it('closes, within the idle timeout, a connection whose body keeps trickling after its request was answered (no second answer)', async () => {
    const head =
      'POST /api/v1/contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer od_live_wrong\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n';
    // A byte every 400 ms: never idle for the timeout, and a body nobody will read.
    const { text, closedAfterMs } = await rawExchange(suite.url, [head, ...'{"first_name":"Trickle"}'.split('')], 400, BOUND_MS + 4_000);
    expect(text).toMatch(/^HTTP\/1\.1 401/);
    expect([...text.matchAll(/HTTP\/1\.1 \d{3} /g)]).toHaveLength(1);
    expect(closedAfterMs).not.toBeNull();
    expect(closedAfterMs!).toBeGreaterThanOrEqual(IDLE_SECONDS * 1000 - 100);
    expect(closedAfterMs!).toBeLessThan(BOUND_MS);
  });

  it('closes the connection of a body that stalls after a URL refused before routing (400)', async () => {
    const { text, closedAfterMs } = await rawExchange(
      suite.url,
      [
        `POST /api/v1/%zz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${suite.org.key}\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"f`,
      ],
      0,
      BOUND_MS + 2_000,
    );
    expect(text).toMatch(/^HTTP\/1\.1 400/);
    expect(text).toContain('invalid_request');
    expect(closedAfterMs).not.toBeNull();
    expect(closedAfterMs!).toBeLessThan(BOUND_MS);
  });

  it('keeps the connection of a whole request refused before routing: the next request on it is answered', async () => {
    const body = '{"first_name":"x"}';
    const { text } = await rawExchange(
      suite.url,
      [
        'GET /api/v1/contacts/%zz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n' +
          `POST /api/v1/%zz HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}` +
          'GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
      ],
      0,
      BOUND_MS,
    );
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]))).toEqual([400, 200, 400, 200]);
  });

  it('takes a client that closes mid-body for what it is: no warning of a lost database', async () => {
    const body = JSON.stringify({ first_name: 'Gone', email: 'gone@example.com' });
    const socket = net.connect(Number(new URL(suite.url).port), new URL(suite.url).hostname);
    await new Promise((resolve) => socket.once('connect', resolve));
    socket.write(
      `POST /api/v1/contacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${suite.org.key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 6)}`,
    );
    await sleep(300);
    socket.destroy();
    await sleep(500);
    expect(((await (await api('/contacts?email=gone@example.com')).json()) as { data: unknown[] }).data).toEqual([]);
    // The last test reads the whole output: a warning here would fail it too.
    const warned = suite.server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{') && line.includes('database connection lost'));
    expect(warned).toEqual([]);
  });

  it('logs the cuts as information, not as warnings or errors of ours', () => {
    const lines = suite.server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'));
    const errors = lines.map((line) => JSON.parse(line) as { level: number; msg: string }).filter((line) => line.level >= 40);
    expect(errors).toEqual([]);
  });
});
