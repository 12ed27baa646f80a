import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkResponse } from './helpers/contract.js';
import { TEST_REDIS_URL } from './helpers/harness.js';
import { RedisServer } from './helpers/redisServer.js';
import { freePort, orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';
import { TcpProxy } from './helpers/tcpProxy.js';

/**
 * Graceful shutdown of a real `orgdata serve` process under load: on SIGTERM or SIGINT /readyz
 * answers 503 at once, the listener then closes, every request already sent is answered in full
 * (none is cut), and the process exits 0 within SHUTDOWN_GRACE_SECONDS, logging its start and end.
 */
const LOOPS = 20;

interface Outcome {
  method: 'GET' | 'POST';
  startedAt: number;
  endedAt: number;
  status?: number;
  /** The response's Connection header. */
  connection?: string;
  /** Why the request failed (a connection error) or its response was not valid. */
  error?: string;
}

/** One request over `agent`; a POST's body arrives in two parts `pauseMs` apart. */
function send(
  base: string,
  agent: http.Agent,
  key: string,
  method: 'GET' | 'POST',
  pauseMs: number,
): Promise<Omit<Outcome, 'startedAt' | 'endedAt'>> {
  const path = method === 'GET' ? '/api/v1/contacts?limit=5' : '/api/v1/contacts';
  const body = JSON.stringify({ first_name: 'Draining', email: `drain-${Math.random().toString(36).slice(2)}@example.com` });
  const headers: Record<string, string> = { authorization: `Bearer ${key}` };
  if (method === 'POST') Object.assign(headers, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) });
  return new Promise((resolve) => {
    const req = http.request(`${base}${path}`, { method, agent, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('aborted', () => resolve({ method, status: res.statusCode, error: 'response aborted' }));
      res.on('error', (error) => resolve({ method, status: res.statusCode, error: `response: ${error.message}` }));
      res.on('end', () => {
        const text = Buffer.concat(chunks);
        try {
          if (!res.complete) throw new Error('incomplete response');
          checkResponse(method, path, res.statusCode!, res.headers, text, headers);
          const json = JSON.parse(text.toString('utf8')) as { data?: unknown[]; id?: string };
          const expected = method === 'GET' ? 200 : 201;
          if (res.statusCode !== expected) throw new Error(`status ${res.statusCode}: ${text.toString('utf8')}`);
          if (method === 'GET' ? !Array.isArray(json.data) : !json.id?.startsWith('con_')) throw new Error('unexpected body');
          resolve({ method, status: res.statusCode, connection: res.headers.connection });
        } catch (error) {
          resolve({ method, status: res.statusCode, error: `invalid response: ${(error as Error).message}` });
        }
      });
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve({ method, error: error.code ?? error.message }));
    if (method === 'GET') {
      req.end();
    } else {
      const half = Math.floor(body.length / 2);
      req.write(body.slice(0, half));
      setTimeout(() => req.end(body.slice(half)), pauseMs);
    }
  });
}

interface Poll {
  startedAt: number;
  endedAt: number;
  status?: number;
  body?: string;
  error?: string;
}

/** GET /readyz on a fresh connection each time. */
function pollReady(base: string): Promise<Poll> {
  const startedAt = performance.now();
  return new Promise((resolve) => {
    const req = http.get(`${base}/readyz`, { agent: false }, (res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => (body += chunk.toString()));
      res.on('end', () => resolve({ startedAt, endedAt: performance.now(), status: res.statusCode, body }));
      res.on('error', (error) => resolve({ startedAt, endedAt: performance.now(), error: error.message }));
    });
    req.on('error', (error: NodeJS.ErrnoException) =>
      resolve({ startedAt, endedAt: performance.now(), error: error.code ?? error.message }),
    );
  });
}

/** A poll as one letter: R ready, S shutting down, X refused (anything else is spelt out). */
function letter(poll: Poll): string {
  if (poll.error) return 'X';
  const status = (JSON.parse(poll.body!) as { status?: string }).status;
  if (poll.status === 200 && status === 'ready') return 'R';
  if (poll.status === 503 && status === 'shutting down') return 'S';
  return `[${poll.status} ${poll.body}]`;
}

const CASES: { dialect: 'sqlite' | 'postgres'; signal: NodeJS.Signals; skip: boolean }[] = [
  { dialect: 'sqlite', signal: 'SIGTERM', skip: false },
  { dialect: 'sqlite', signal: 'SIGINT', skip: false },
  { dialect: 'postgres', signal: 'SIGTERM', skip: !process.env.TEST_DATABASE_URL },
];

describe('graceful shutdown of orgdata serve', { timeout: 120_000 }, () => {
  const servers: ServerEnv[] = [];
  afterAll(async () => {
    for (const server of servers) await server.dispose();
  });

  for (const { dialect, signal, skip } of CASES) {
    it.skipIf(skip)(`${signal} on ${dialect} under load: readiness fails first, every request sent is answered, exit 0`, async () => {
      const server = await serverEnv(dialect, {
        LOG_LEVEL: 'info',
        SHUTDOWN_GRACE_SECONDS: '10',
        SHUTDOWN_DELAY_SECONDS: '1',
        ...(dialect === 'postgres' && TEST_REDIS_URL ? { REDIS_URL: TEST_REDIS_URL } : {}),
      });
      servers.push(server);
      const { key } = await orgWithKey(server.env);
      const proc = await startServerProcess(server);
      const exited = proc.exited.then((result) => ({ ...result, at: performance.now() }));

      const agent = new http.Agent({ keepAlive: true, maxSockets: LOOPS });
      const outcomes: Outcome[] = [];
      let stop = false;
      const loop = async (n: number) => {
        for (let i = 0; !stop; i++) {
          const method = (n + i) % 2 ? 'GET' : 'POST';
          const startedAt = performance.now();
          const outcome = await send(server.url, agent, key, method, 100 + ((n * 37 + i * 53) % 200));
          outcomes.push({ ...outcome, startedAt, endedAt: performance.now() });
          if (outcome.error) await sleep(10);
        }
      };
      const polls: Poll[] = [];
      const poller = async () => {
        while (!stop) {
          polls.push(await pollReady(server.url));
          await sleep(20);
        }
      };
      const load = Promise.all([...Array.from({ length: LOOPS }, (_, n) => loop(n)), poller()]);

      // Under load before the signal: a fixed 1.5 s saw only 75 requests answered on a busy machine
      // (CI beside other runs), short of the 100 the test asks for. Wait for them, within 15 s.
      const loadedBy = performance.now() + 15_000;
      await sleep(1500);
      while (outcomes.filter((o) => !o.error).length < 150 && performance.now() < loadedBy) await sleep(50);
      const signalledAt = performance.now();
      proc.child.kill(signal);
      const exit = await Promise.race([exited, sleep(20_000).then(() => null)]);
      stop = true;
      await load;
      agent.destroy();
      if (!exit) proc.child.kill('SIGKILL');

      // Exits 0, within the grace period.
      expect(exit, proc.output().slice(-2000)).not.toBeNull();
      expect({ code: exit!.code, signal: exit!.signal }).toEqual({ code: 0, signal: null });
      expect(exit!.at - signalledAt).toBeLessThan(10_000);

      // Every response is complete and valid; every request sent before the signal got one.
      const before = outcomes.filter((o) => o.startedAt < signalledAt);
      const inFlight = before.filter((o) => o.endedAt > signalledAt);
      expect(outcomes.filter((o) => o.status !== undefined && o.error)).toEqual([]);
      expect(before.filter((o) => o.error)).toEqual([]);
      expect(before.length).toBeGreaterThan(100);
      expect(inFlight.length).toBeGreaterThan(0);
      // /readyz: ready until the server takes the signal, then 503 "shutting down" while the
      // listener still accepts, and only then refused. (A poll in flight when the signal is sent
      // may be answered either way: only those answered before it must say ready.)
      const sequence = polls.map(letter).join('');
      expect(
        polls
          .filter((p) => p.endedAt < signalledAt)
          .map(letter)
          .join(''),
      ).toMatch(/^R+$/);
      expect(sequence).toMatch(/^R+S+X+$/);
      // From then on, requests are still answered during the delay, with Connection: close.
      const shuttingSince = polls.find((p) => letter(p) === 'S')!.endedAt;
      const duringDelay = outcomes.filter((o) => o.startedAt > shuttingSince && o.status !== undefined);
      expect(duringDelay.length).toBeGreaterThan(0);
      expect(duringDelay.filter((o) => o.connection !== 'close')).toEqual([]);

      // One line at the start of the shutdown and one at its end.
      const lines = proc
        .output()
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { msg: string; signal?: string; connectionsCut?: number; level: number });
      expect(lines.filter((l) => l.msg.startsWith('shutting down'))).toMatchObject([{ signal }]);
      expect(lines.filter((l) => l.msg === 'shut down')).toMatchObject([{ connectionsCut: 0 }]);
      expect(lines.filter((l) => l.level >= 50)).toEqual([]);
    });
  }

  it('cuts a request still running at the end of the grace period, and still exits 0', async () => {
    const server = await serverEnv('sqlite', { LOG_LEVEL: 'info', SHUTDOWN_GRACE_SECONDS: '2', SHUTDOWN_DELAY_SECONDS: '0' });
    servers.push(server);
    const { key } = await orgWithKey(server.env);
    const proc = await startServerProcess(server);

    // A POST whose body never finishes arriving.
    const stalled = new Promise<string>((resolve) => {
      const req = http.request(`${server.url}/api/v1/contacts`, {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': '100' },
      });
      req.on('response', (res) => resolve(`answered ${res.statusCode}`));
      req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      req.write('{"first_name":');
    });
    await sleep(300);
    const signalledAt = performance.now();
    proc.child.kill('SIGTERM');
    const exit = await proc.exited;
    const took = performance.now() - signalledAt;

    expect(exit).toEqual({ code: 0, signal: null });
    expect(took).toBeGreaterThanOrEqual(1900);
    expect(took).toBeLessThan(6000);
    expect(await stalled).toBe('ECONNRESET');
    const end = proc
      .output()
      .split('\n')
      .filter((line) => line.includes('"shut down"'))
      .map((line) => JSON.parse(line) as { connectionsCut: number });
    expect(end).toMatchObject([{ connectionsCut: 1 }]);
  });
  it('answers an upload finishing during the shutdown with Connection: close, like every other response', async () => {
    const server = await serverEnv('sqlite', { LOG_LEVEL: 'info', SHUTDOWN_GRACE_SECONDS: '10', SHUTDOWN_DELAY_SECONDS: '0' });
    servers.push(server);
    const { key } = await orgWithKey(server.env);
    const proc = await startServerProcess(server);
    const bytes = Buffer.alloc(64 * 1024, 7);
    const reserved = await fetch(`${server.url}/api/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'late.bin', content_type: 'application/octet-stream', size: bytes.length }),
    });
    expect(reserved.status).toBe(201);
    const { upload_url } = (await reserved.json()) as { upload_url: string };
    const answered = new Promise<{ status?: number; connection?: string }>((resolve, reject) => {
      const req = http.request(upload_url, {
        method: 'PUT',
        agent: false,
        headers: { 'content-type': 'application/octet-stream', 'content-length': String(bytes.length) },
      });
      req.on('response', (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode, connection: res.headers.connection }));
      });
      req.on('error', reject);
      req.write(bytes.subarray(0, 1000));
      // The rest arrives after SIGTERM.
      setTimeout(() => req.end(bytes.subarray(1000)), 800);
    });
    await sleep(200);
    proc.child.kill('SIGTERM');
    expect(await answered).toEqual({ status: 200, connection: 'close' });
    expect(await proc.exited).toEqual({ code: 0, signal: null });
  });

  it.skipIf(!process.env.TEST_DATABASE_URL)(
    'exits 1 naming the step when closing fails (PostgreSQL stalled under a request), never 0 without its last line',
    async () => {
      const base = new URL(process.env.TEST_DATABASE_URL!);
      const proxy = await TcpProxy.start({ host: base.hostname, port: Number(base.port || 5432) });
      try {
        // A statement deadline far beyond the shutdown's, so that the stalled query holds its
        // connection (and the pool cannot end) until the process is gone.
        const server = await serverEnv('postgres', {
          LOG_LEVEL: 'info',
          SHUTDOWN_GRACE_SECONDS: '1',
          SHUTDOWN_DELAY_SECONDS: '0',
          DATABASE_STATEMENT_TIMEOUT_MS: '120000',
        });
        servers.push(server);
        const proxied = new URL(server.env.DATABASE_URL!);
        proxied.hostname = '127.0.0.1';
        proxied.port = String(proxy.port);
        server.env.DATABASE_URL = proxied.toString();
        const { key } = await orgWithKey(server.env);
        const proc = await startServerProcess(server);
        proxy.stall();
        const request = fetch(`${server.url}/api/v1/contacts`, { headers: { authorization: `Bearer ${key}` } }).then(
          (res) => res.status,
          (error: Error) => error.message,
        );
        await sleep(300);
        const signalledAt = performance.now();
        proc.child.kill('SIGTERM');
        const exit = await proc.exited;
        const took = performance.now() - signalledAt;
        expect(exit).toEqual({ code: 1, signal: null });
        // Within the grace period and the steps' deadlines (5 s each), inside grace + 10 s.
        expect(took).toBeLessThan(13_000);
        const lines = proc.output().split('\n');
        const failed = lines.filter((line) => line.includes('"shutdown failed"')).map((line) => JSON.parse(line) as { failed: string[] });
        expect(failed).toHaveLength(1);
        expect(failed[0]!.failed).toContain('the database');
        expect(lines.some((line) => line.includes('"shut down"'))).toBe(false);
        await request;
      } finally {
        await proxy.close();
      }
    },
  );

  // Redis goes with PostgreSQL (a server refuses REDIS_URL without DATABASE_URL): one redis-server
  // of their own, one database and one organisation for both, a server process each.
  describe.skipIf(!process.env.TEST_DATABASE_URL)('with Redis (PostgreSQL)', () => {
    let redis: RedisServer;
    let shared: ServerEnv;
    let key: string;
    /** The shared database and Redis with these settings, on a port of its own. */
    const instance = async (settings: Record<string, string>): Promise<ServerEnv> => {
      const port = await freePort();
      return { ...shared, env: { ...shared.env, ...settings, PORT: String(port) }, url: `http://127.0.0.1:${port}` };
    };
    beforeAll(async () => {
      redis = await RedisServer.start();
      shared = await serverEnv('postgres', { LOG_LEVEL: 'info', REDIS_URL: redis.url });
      servers.push(shared);
      ({ key } = await orgWithKey(shared.env));
    }, 120_000);
    afterAll(async () => {
      await redis?.stop();
    });

    it('exits 1 with `shutdown failed` naming the Redis steps when Redis is stalled, never 0 early', async () => {
      // A grace period shorter than Redis takes to be noticed as stalled (3 s without an answer):
      // the Redis clients are still connected when the shutdown closes them.
      const server = await instance({ SHUTDOWN_GRACE_SECONDS: '1', SHUTDOWN_DELAY_SECONDS: '0' });
      const proc = await startServerProcess(server);
      try {
        // Connected to Redis (the rate limiter counts there).
        await expect
          .poll(async () => (await (await fetch(`${server.url}/readyz`)).json()) as unknown, { timeout: 15_000 })
          .toMatchObject({ status: 'ready' });
        redis.stall();
        // A request waiting on Redis (its rate limit) when the signal comes: answered once Redis's
        // deadlines pass, or cut at the end of the grace period.
        const waiting = fetch(`${server.url}/api/v1/contacts?limit=1`, { headers: { authorization: `Bearer ${key}` } }).then(
          (res) => res.status,
          () => 'cut',
        );
        await sleep(200);
        const signalledAt = performance.now();
        proc.child.kill('SIGTERM');
        const exit = await Promise.race([proc.exited, sleep(30_000).then(() => null)]);
        const took = performance.now() - signalledAt;
        if (!exit) proc.child.kill('SIGKILL');
        expect(exit, proc.output().slice(-3000)).toEqual({ code: 1, signal: null });
        // Grace (1 s), then each step's deadline (3 s): before the CLI's own limit (grace + 10 s).
        expect(took).toBeLessThan(10_000);
        expect([200, 'cut']).toContain(await waiting);
        const lines = proc
          .output()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as { msg: string; failed?: string[] });
        expect(lines.filter((l) => l.msg === 'shut down')).toEqual([]);
        const failed = lines.filter((l) => l.msg === 'shutdown failed');
        expect(failed, proc.output().slice(-3000)).toHaveLength(1);
        // Every Redis client: on PostgreSQL the key cache hears revocations through Redis too.
        expect([...failed[0]!.failed!].sort()).toEqual(['the key cache', 'the rate limiter', 'the sign-in throttle']);
      } finally {
        redis.resume();
      }
    });

    it('exits 0 with `shut down` when Redis answers', async () => {
      const server = await instance({ SHUTDOWN_GRACE_SECONDS: '5', SHUTDOWN_DELAY_SECONDS: '0' });
      const proc = await startServerProcess(server);
      await expect
        .poll(async () => (await (await fetch(`${server.url}/readyz`)).json()) as unknown, { timeout: 15_000 })
        .toMatchObject({ status: 'ready' });
      expect((await fetch(`${server.url}/api/v1/contacts?limit=1`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
      proc.child.kill('SIGTERM');
      expect(await proc.exited).toEqual({ code: 0, signal: null });
      const lines = proc
        .output()
        .split('\n')
        .filter((line) => line.includes('"shut down"'));
      expect(lines).toHaveLength(1);
      expect(proc.output()).not.toContain('"level":50');
    });
  });
});
