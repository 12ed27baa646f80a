// @tier full: Debian's PgBouncer in transaction mode and three server processes behind it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgBouncer, pgbouncerUnavailable } from './helpers/pgbouncer.js';
import { cli, orgWithKey, serverEnv, startServerProcess, type ServerEnv, type ServerProcess } from './helpers/serverProcess.js';

/**
 * Behind a transaction pooler (PgBouncer 1.18, pool_mode = transaction, stock settings otherwise),
 * DATABASE_POOL_MODE=transaction keeps what the several-instances tests check on PostgreSQL
 * directly: immediate revocation on every instance, one record per Idempotency-Key, shared
 * limits, any instance's cursor. A and B hear revocations over Redis (no DATABASE_DIRECT_URL); C
 * has no Redis and LISTENs on DATABASE_DIRECT_URL.
 */
const UNAVAILABLE =
  !process.env.TEST_DATABASE_URL || !process.env.TEST_REDIS_URL ? 'TEST_DATABASE_URL and TEST_REDIS_URL' : pgbouncerUnavailable();

describe.skipIf(UNAVAILABLE !== null)('several instances behind PgBouncer in transaction mode', { timeout: 180_000 }, () => {
  let bouncer: PgBouncer;
  let base: ServerEnv;
  const envs: ServerEnv[] = [];
  const servers: ServerProcess[] = [];
  let key: string;
  let orgId: string;
  let keyId: string;
  let cliEnv: Record<string, string>;

  beforeAll(async () => {
    // A database of its own on the shared server, reached through a PgBouncer of the test's own.
    base = await serverEnv('postgres');
    bouncer = await PgBouncer.start(base.env.DATABASE_URL!);
    const direct = base.env.DATABASE_URL!;
    const pooled = {
      DATABASE_URL: bouncer.through(direct),
      DATABASE_POOL_MODE: 'transaction',
      RATE_LIMIT_BURST: '1000',
      RATE_LIMIT_PER_SECOND: '0.01',
    };
    const redis = { REDIS_URL: process.env.TEST_REDIS_URL! };
    cliEnv = { ...base.env, ...pooled, ...redis };
    ({ key, orgId, keyId } = await orgWithKey(cliEnv));
    for (const extra of [redis, redis, { DATABASE_DIRECT_URL: direct }]) {
      const env = await serverEnv('sqlite', { ...pooled, ...extra });
      envs.push(env);
    }
    for (const env of envs) servers.push(await startServerProcess(env, { startSeconds: 90 }));
  }, 400_000);
  afterAll(async () => {
    for (const server of servers) {
      server.child.kill('SIGKILL');
      await server.exited;
    }
    await bouncer?.stop();
    await base?.dispose();
  });

  const call = (i: number, path: string, init: RequestInit & { apiKey?: string } = {}) =>
    fetch(`${envs[i]!.url}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${init.apiKey ?? key}`, 'content-type': 'application/json', ...(init.headers as object) },
    });

  it('every instance is ready, and 200 requests spread over them all answer without a 500', async () => {
    for (let i = 0; i < 3; i++) expect(((await (await fetch(`${envs[i]!.url}/readyz`)).json()) as { status: string }).status).toBe('ready');
    const statuses: number[] = [];
    for (let wave = 0; wave < 10; wave++) {
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, n) =>
          n % 4 === 0
            ? call(n % 3, '/api/v1/contacts', {
                method: 'POST',
                body: JSON.stringify({ first_name: 'Pooled', email: `p-${wave}-${n}@example.com` }),
              })
            : call(n % 3, `/api/v1/contacts?limit=${1 + (n % 5)}`),
        ),
      );
      statuses.push(...answers.map((res) => res.status));
    }
    expect(statuses.filter((status) => status >= 500)).toEqual([]);
    expect(new Set(statuses)).toEqual(new Set([200, 201]));
  });

  it('shares the rate limit of a key across instances (Redis)', async () => {
    const left = async (i: number) => /;r=(\d+);/.exec((await call(i, '/api/v1/contacts?limit=1')).headers.get('ratelimit') ?? '')?.[1];
    const first = Number(await left(0));
    expect(Number(await left(1))).toBe(first - 1);
  });

  it('creates exactly one contact for an Idempotency-Key sent concurrently to two instances', async () => {
    const body = JSON.stringify({ first_name: 'Once', email: 'once@example.com' });
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, n) =>
        call(n % 2, '/api/v1/contacts', { method: 'POST', body, headers: { 'idempotency-key': 'pooled-once' } }),
      ),
    );
    const statuses = answers.map((res) => res.status);
    expect(statuses.every((status) => status === 201 || status === 409)).toBe(true);
    const ids = new Set(
      await Promise.all(answers.filter((res) => res.status === 201).map(async (res) => ((await res.json()) as { id: string }).id)),
    );
    expect(ids.size).toBe(1);
    const search = (await (await call(2, '/api/v1/contacts?email=once%40example.com')).json()) as { data: unknown[] };
    expect(search.data).toHaveLength(1);
  });

  it("follows one instance's cursor on another", async () => {
    const first = (await (await call(0, '/api/v1/contacts?limit=2')).json()) as { data: { id: string }[]; next_cursor: string };
    expect(first.next_cursor).toBeTruthy();
    const next = await call(1, `/api/v1/contacts?limit=2&cursor=${encodeURIComponent(first.next_cursor)}`);
    expect(next.status).toBe(200);
    const ids = ((await next.json()) as { data: { id: string }[] }).data.map((c) => c.id);
    expect(ids).not.toContain(first.data[0]!.id);
  });

  it('refuses a revoked key at once on every instance: A and B over Redis, C over LISTEN on DATABASE_DIRECT_URL', async () => {
    // Each instance verifies the key once more, so that it is in each one's cache.
    for (let i = 0; i < 3; i++) expect((await call(i, '/api/v1/contacts?limit=1')).status).toBe(200);
    await cli(cliEnv, ['keys', 'revoke', '--org', orgId, keyId]);
    for (let i = 0; i < 3; i++) expect((await call(i, '/api/v1/contacts?limit=1')).status).toBe(401);
  });
});
