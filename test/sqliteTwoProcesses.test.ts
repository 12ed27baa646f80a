import path from 'node:path';
import SQLite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, freePort, orgWithKey, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from './helpers/serverProcess.js';

/**
 * @tier full (two server processes). Two `orgdata serve` processes on one SQLite data directory, with the operator CLI writing beside
 * them: each transaction waits for the other processes' write lock (BEGIN IMMEDIATE within
 * busy_timeout) rather than fail, so concurrent writes all succeed, none is half-written, and a
 * keyed POST sent to both processes at once makes one record.
 */
describe('sqlite: two server processes and the CLI on one data directory', () => {
  let env: ServerEnv;
  let second: ServerEnv;
  const servers: ServerProcess[] = [];
  let key: string;
  let orgId: string;
  let email: string;

  beforeAll(async () => {
    env = await serverEnv('sqlite');
    ({ key, orgId, email } = await orgWithKey(env.env));
    const port = await freePort();
    second = { env: { ...env.env, PORT: String(port) }, url: `http://127.0.0.1:${port}`, dispose: async () => {} };
    servers.push(await startServerProcess(env), await startServerProcess(second));
  }, 120_000);

  afterAll(async () => {
    for (const server of servers) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    await env?.dispose();
  });

  const post = (base: string, body: unknown, idempotencyKey?: string) =>
    fetch(`${base}/api/v1/contacts`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
      },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });

  it('answers every concurrent write from both processes 201, beside CLI writes, with every row whole', async () => {
    const N = 40;
    const writes: Promise<Response>[] = [];
    for (let i = 0; i < N; i++) {
      const base = i % 2 === 0 ? env.url : second.url;
      writes.push(post(base, { first_name: `P${i}`, email: `p${i}@example.com` }, i % 4 < 2 ? `k-${i}` : undefined));
    }
    const cliRuns = [0, 1, 2].map((i) =>
      cli(env.env, ['keys', 'create', '--org', orgId, '--admin-email', email, '--name', `cli ${i}`, '--scopes', 'contacts:read']),
    );
    const responses = await Promise.all(writes);
    const bodies = await Promise.all(responses.map(async (r) => `${r.status} ${await r.text()}`));
    expect(bodies.filter((b) => !b.startsWith('201'))).toEqual([]);
    await Promise.all(cliRuns);
    const file = new SQLite(path.join(env.env.DATA_DIR!, 'orgdata.sqlite'), { readonly: true });
    try {
      expect(file.prepare("select count(*) as n from contacts where email like 'p%@example.com'").get()).toEqual({ n: N });
      // Each keyed write stored its response with it.
      expect(file.prepare("select count(*) as n from idempotency_keys where key like 'k-%' and response_body is not null").get()).toEqual({
        n: N / 2,
      });
      // Every create has its event (the outbox row of the same transaction).
      expect(
        file
          .prepare(
            "select count(*) as n from contacts c where c.email like 'p%@example.com' and not exists (select 1 from events e where e.type = 'contact.created' and e.data like '%' || c.id || '%')",
          )
          .get(),
      ).toEqual({ n: 0 });
    } finally {
      file.close();
    }
  }, 120_000);

  it('makes one record for a keyed POST sent to both processes at once', async () => {
    const body = { first_name: 'Twice', email: 'twice@example.com' };
    const responses = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => post(i % 2 ? second.url : env.url, body, 'key-both')));
    const statuses = await Promise.all(
      responses.map(async (r) => [r.status, r.headers.get('idempotent-replayed'), await r.text()] as const),
    );
    expect(statuses.filter(([s]) => s !== 201 && s !== 409)).toEqual([]);
    expect(statuses.filter(([s, replayed]) => s === 201 && replayed === null)).toHaveLength(1);
    const file = new SQLite(path.join(env.env.DATA_DIR!, 'orgdata.sqlite'), { readonly: true });
    try {
      expect(file.prepare("select count(*) as n from contacts where email = 'twice@example.com'").get()).toEqual({ n: 1 });
    } finally {
      file.close();
    }
  }, 60_000);

  it('answers a crowd of mixed requests (keyed and unkeyed creates, updates, labels, lists) on both processes without a 5xx', async () => {
    const send = (base: string, method: string, url: string, body?: unknown, idempotencyKey?: string) =>
      fetch(`${base}${url}`, {
        method,
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(60_000),
      });
    const seeded = await Promise.all(
      [0, 1, 2, 3].map(
        async (i) => ((await (await post(env.url, { first_name: `Seed${i}`, email: `seed${i}@example.com` })).json()) as { id: string }).id,
      ),
    );
    const requests: Promise<Response>[] = [];
    for (let i = 0; i < 120; i++) {
      const base = i % 2 ? second.url : env.url;
      switch (i % 6) {
        case 0:
          requests.push(send(base, 'POST', '/api/v1/contacts', { first_name: `M${i}`, email: `m${i}@example.com` }, `mk-${i}`));
          break;
        case 1:
          requests.push(send(base, 'POST', '/api/v1/contacts', { first_name: `M${i}`, email: `m${i}@example.com` }));
          break;
        case 2:
          requests.push(send(base, 'PATCH', `/api/v1/contacts/${seeded[i % 4]}`, { last_name: `L${i}` }));
          break;
        case 3:
          requests.push(send(base, 'POST', '/api/v1/contacts/labels', { name: `label ${i}` }, i % 4 === 3 ? `lk-${i}` : undefined));
          break;
        default:
          requests.push(send(base, 'GET', '/api/v1/contacts?limit=10'));
      }
    }
    const answers = await Promise.all(
      requests.map((request) =>
        request.then(
          async (r) => `${r.status} ${r.status >= 300 ? await r.text() : ''}`,
          (error: Error) => `failed ${String((error.cause as Error | undefined)?.message ?? error.message)}`,
        ),
      ),
    );
    expect(
      servers.map((server) => server.child.exitCode),
      servers.map((server) => server.output()).join('\n'),
    ).toEqual([null, null]);
    expect(answers.filter((a) => !/^20[01] /.test(a))).toEqual([]);
  }, 120_000);
});
