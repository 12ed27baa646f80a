import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { orgWithKey, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from './helpers/serverProcess.js';
import { TcpProxy } from './helpers/tcpProxy.js';
import { fetchSignIn } from './helpers/signInForm.js';

/**
 * PostgreSQL lost mid-traffic never hangs a request and never half-writes one: a real server
 * process reaches PostgreSQL through a TCP proxy of the test's own, which refuses, stalls and
 * resets connections; and the server's backends are terminated (pg_terminate_backend) while a
 * request waits on a lock. Requests answer 503 `service_unavailable` with Retry-After within a
 * bound (never a 500, never a hang) or succeed on a new connection; /readyz says 503 while the
 * database cannot be reached; once it can, everything works again without a restart; a POST
 * retried with its Idempotency-Key is applied exactly once.
 */
/** Generous bounds: the deadlines are 3 s (/readyz), 5 s (connect) and statement timeout + 2 s. */
const READY_BOUND_MS = 8_000;
const REQUEST_BOUND_MS = 20_000;

interface Answer {
  status: number;
  ms: number;
  headers: Headers;
  body: string;
}

async function timed(url: string, init: RequestInit = {}): Promise<Answer> {
  const started = Date.now();
  // A hanging request fails the test instead of hanging it.
  const res = await fetch(url, { ...init, signal: AbortSignal.timeout(60_000) });
  const body = await res.text();
  return { status: res.status, ms: Date.now() - started, headers: res.headers, body };
}

function expectUnavailable(answer: Answer, bound: number): void {
  expect(answer.status, answer.body).toBe(503);
  expect(answer.ms).toBeLessThan(bound);
  expect(Number(answer.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(answer.headers.get('content-type')).toContain('application/problem+json');
  expect((JSON.parse(answer.body) as { code: string }).code).toBe('service_unavailable');
}

describe.skipIf(!process.env.TEST_DATABASE_URL)('postgres: with the database unreachable, stalled or its connections lost', () => {
  let proxy: TcpProxy;
  let env: ServerEnv;
  let server: ServerProcess;
  let org: Awaited<ReturnType<typeof orgWithKey>>;
  let database: string;
  let admin: pg.Client;
  let directUrl: string;

  const api = (path: string, init: RequestInit = {}) =>
    timed(`${env.url}/api/v1${path}`, {
      ...init,
      headers: { authorization: `Bearer ${org.key}`, 'content-type': 'application/json', ...init.headers },
    });
  const createContact = (email: string, idempotencyKey: string) =>
    api('/contacts', {
      method: 'POST',
      headers: { 'idempotency-key': idempotencyKey },
      body: JSON.stringify({ first_name: 'Outage', email }),
    });
  /** Counted directly in the database, past the server. */
  const count = async (table: 'contacts' | 'events', email: string): Promise<number> => {
    const where = table === 'contacts' ? 'email = $1' : "data::jsonb -> 'object' ->> 'email' = $1";
    const result = await admin.query<{ n: string }>(`select count(*) as n from ${table} where ${where}`, [email]);
    return Number(result.rows[0]!.n);
  };
  /** Retries a keyed POST until it is answered for good (201, or the replay of the 201). */
  const settle = async (email: string, idempotencyKey: string): Promise<Answer> => {
    for (let attempt = 0; attempt < 60; attempt++) {
      const answer = await createContact(email, idempotencyKey);
      expect([201, 409, 503], answer.body).toContain(answer.status);
      if (answer.status === 201) return answer;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    throw new Error(`${idempotencyKey} was never applied`);
  };
  const waitUntilReady = async () => {
    for (let attempt = 0; attempt < 60; attempt++) {
      if ((await timed(`${env.url}/readyz`)).status === 200) return;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    throw new Error('the server did not become ready again');
  };

  beforeAll(async () => {
    const base = new URL(process.env.TEST_DATABASE_URL!);
    proxy = await TcpProxy.start({ host: base.hostname, port: Number(base.port || 5432) });
    // A statement timeout long enough for a request to wait on the test's lock while the test
    // terminates its connection.
    env = await serverEnv('postgres', { DATABASE_STATEMENT_TIMEOUT_MS: '10000', LOG_LEVEL: 'info' });
    const direct = new URL(env.env.DATABASE_URL!);
    database = direct.pathname.slice(1);
    directUrl = direct.toString();
    admin = new pg.Client({ connectionString: directUrl });
    const proxied = new URL(direct);
    proxied.hostname = '127.0.0.1';
    proxied.port = String(proxy.port);
    env.env.DATABASE_URL = proxied.toString();
    org = await orgWithKey(env.env);
    server = await startServerProcess(env);
    await admin.connect();
  }, 120_000);

  afterAll(async () => {
    if (process.env.DEBUG_OUTPUT) console.log(server?.output().slice(-8000));
    server?.child.kill('SIGKILL');
    await server?.exited;
    await admin?.end();
    await proxy?.close();
    await env?.dispose();
  });

  it('answers 503 at once while nothing listens, /readyz included, and recovers by itself', async () => {
    expect((await api('/contacts')).status).toBe(200);
    await proxy.refuse();
    try {
      expectUnavailable(await api('/contacts'), READY_BOUND_MS);
      expectUnavailable(await createContact('refused@example.com', 'refused-1'), READY_BOUND_MS);
      const ready = await timed(`${env.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(ready.ms).toBeLessThan(READY_BOUND_MS);
      expect(JSON.parse(ready.body)).toMatchObject({ status: 'database unreachable' });
      expect((await timed(`${env.url}/healthz`)).status).toBe(200);
      // The dashboard's sign-in too: a 503 page with Retry-After, not a 500.
      const signIn = await fetchSignIn(env.url, { email: org.email, password: org.password }, { signal: AbortSignal.timeout(30_000) });
      expect(signIn.status).toBe(503);
      expect(signIn.headers.get('retry-after')).toBe('2');
      expect(await signIn.text()).toContain('Temporarily unavailable');
    } finally {
      await proxy.restore();
    }
    await waitUntilReady();
    expect((await api('/contacts')).status).toBe(200);
    // The refused POST wrote nothing; retried with its key it is applied once.
    expect(await count('contacts', 'refused@example.com')).toBe(0);
    await settle('refused@example.com', 'refused-1');
    expect(await count('contacts', 'refused@example.com')).toBe(1);
    expect(await count('events', 'refused@example.com')).toBe(1);
    expect(server.output()).toContain('database connection lost');
  }, 120_000);

  it('answers 503 within a bound while the database stalls, and the POSTs caught in it apply once', async () => {
    expect((await api('/contacts')).status).toBe(200);
    proxy.stall();
    let inFlight: Answer[];
    try {
      const ready = timed(`${env.url}/readyz`);
      const reads = [api('/contacts'), api('/contacts?limit=1')];
      const writes = [0, 1, 2].map((i) => createContact(`stalled-${i}@example.com`, `stalled-${i}`));
      const readyAnswer = await ready;
      expect(readyAnswer.status).toBe(503);
      expect(readyAnswer.ms).toBeLessThan(READY_BOUND_MS);
      inFlight = await Promise.all([...reads, ...writes]);
      for (const answer of inFlight) expectUnavailable(answer, REQUEST_BOUND_MS);
      expect((await timed(`${env.url}/healthz`)).status).toBe(200);
    } finally {
      await proxy.restore();
    }
    await waitUntilReady();
    for (const i of [0, 1, 2]) {
      await settle(`stalled-${i}@example.com`, `stalled-${i}`);
      expect(await count('contacts', `stalled-${i}@example.com`)).toBe(1);
      expect(await count('events', `stalled-${i}@example.com`)).toBe(1);
    }
  }, 180_000);

  it('answers 503 for POSTs whose connections are reset mid-request, and nothing is half-written', async () => {
    proxy.stall();
    const writes = [0, 1, 2, 3].map((i) => createContact(`reset-${i}@example.com`, `reset-${i}`));
    // Give the requests time to reach the (stalled) database, then drop every connection.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    proxy.cut();
    await proxy.restore();
    for (const answer of await Promise.all(writes)) {
      expect([201, 503], answer.body).toContain(answer.status);
      if (answer.status === 503) expectUnavailable(answer, REQUEST_BOUND_MS);
    }
    for (const i of [0, 1, 2, 3]) {
      await settle(`reset-${i}@example.com`, `reset-${i}`);
      expect(await count('contacts', `reset-${i}@example.com`)).toBe(1);
      expect(await count('events', `reset-${i}@example.com`)).toBe(1);
    }
  }, 120_000);

  it('answers 503 when pg_terminate_backend ends the connection a request waits on, then serves on new connections', async () => {
    expect((await api('/contacts')).status).toBe(200);
    // The test holds a lock the POST needs, so the POST is mid-transaction when its backend ends.
    const locker = new pg.Client({ connectionString: directUrl });
    await locker.connect();
    const lockerPid = await backendPid(locker);
    await locker.query('begin');
    await locker.query('lock table contacts in access exclusive mode');
    const write = createContact('terminated@example.com', 'terminated-1');
    let waiting = 0;
    for (let attempt = 0; attempt < 50 && waiting === 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      const result = await admin.query<{ n: string }>(
        "select count(*) as n from pg_stat_activity where datname = $1 and wait_event_type = 'Lock' and pid <> $2",
        [database, lockerPid],
      );
      waiting = Number(result.rows[0]!.n);
    }
    expect(waiting).toBeGreaterThan(0);
    const terminated = await admin.query<{ n: string }>(
      'select count(pg_terminate_backend(pid)) as n from pg_stat_activity where datname = $1 and pid not in ($2, $3)',
      [database, lockerPid, await backendPid(admin)],
    );
    expect(Number(terminated.rows[0]!.n)).toBeGreaterThan(0);
    await locker.query('rollback');
    await locker.end();
    expectUnavailable(await write, REQUEST_BOUND_MS);
    expect(await count('contacts', 'terminated@example.com')).toBe(0);
    // Idle connections of the pool were terminated too: the next requests get new ones.
    let status = 0;
    for (let attempt = 0; attempt < 10 && status !== 200; attempt++) {
      const answer = await api('/contacts');
      expect([200, 503], answer.body).toContain(answer.status);
      status = answer.status;
    }
    expect(status).toBe(200);
    await settle('terminated@example.com', 'terminated-1');
    expect(await count('contacts', 'terminated@example.com')).toBe(1);
    expect(await count('events', 'terminated@example.com')).toBe(1);
    expect(server.output()).not.toContain('"statusCode":500');
  }, 120_000);
});

async function backendPid(client: pg.Client): Promise<number> {
  return (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
}
