import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../src/config.js';
import { loadConfig } from '../src/config/load.js';
import { makeHarness, type Harness } from './helpers/harness.js';

/**
 * PostgreSQL's pool size (DATABASE_POOL_SIZE) and statement timeout (DATABASE_STATEMENT_TIMEOUT_MS):
 * a small pool still serves many concurrent requests, and a statement that runs too long is
 * cancelled, so a request waiting on it ends in a problem document instead of hanging.
 */
describe('database settings in configuration', () => {
  const rejected = (env: Record<string, string>) => {
    try {
      loadConfig({ DATA_DIR: '/tmp/orgdata-config-test', SECRET_KEY: 'x'.repeat(32), ...env });
    } catch (error) {
      if (error instanceof ConfigError) return error.variable;
      throw error;
    }
    return null;
  };

  it('defaults to 10 connections and 5 s, and refuses values that make no sense', () => {
    const config = loadConfig({ DATA_DIR: '/tmp/orgdata-config-test', SECRET_KEY: 'x'.repeat(32) });
    expect(config).toMatchObject({
      databasePoolSize: 10,
      databaseStatementTimeoutMs: 5000,
      shutdownGraceSeconds: 10,
      shutdownDelaySeconds: 1,
    });
    expect(rejected({ DATABASE_POOL_SIZE: '0' })).toBe('DATABASE_POOL_SIZE');
    expect(rejected({ DATABASE_POOL_SIZE: 'ten' })).toBe('DATABASE_POOL_SIZE');
    expect(rejected({ DATABASE_STATEMENT_TIMEOUT_MS: '0' })).toBe('DATABASE_STATEMENT_TIMEOUT_MS');
    expect(rejected({ DATABASE_STATEMENT_TIMEOUT_MS: '1.5' })).toBe('DATABASE_STATEMENT_TIMEOUT_MS');
    expect(rejected({ SHUTDOWN_GRACE_SECONDS: '-1' })).toBe('SHUTDOWN_GRACE_SECONDS');
    expect(rejected({ SHUTDOWN_GRACE_SECONDS: '2', SHUTDOWN_DELAY_SECONDS: '3' })).toBe('SHUTDOWN_DELAY_SECONDS');
    expect(rejected({ SHUTDOWN_GRACE_SECONDS: '0' })).toBeNull();
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('PostgreSQL pool size and statement timeout', () => {
  let small: Harness;
  let strict: Harness;
  beforeAll(async () => {
    small = await makeHarness('postgres', { env: { DATABASE_POOL_SIZE: '2' } });
    strict = await makeHarness('postgres', { env: { DATABASE_STATEMENT_TIMEOUT_MS: '300' } });
  });
  afterAll(async () => {
    await small?.close();
    await strict?.close();
  });

  it('holds at most DATABASE_POOL_SIZE connections: four 300 ms statements on 2 take two turns', async () => {
    const started = Date.now();
    await Promise.all(Array.from({ length: 4 }, () => sql`select pg_sleep(0.3)`.execute(small.db.kysely)));
    expect(Date.now() - started).toBeGreaterThanOrEqual(550);
  });

  it('answers 50 concurrent requests (lists and creates) through a pool of 2, every one successfully', async () => {
    const org = await small.newOrg();
    const key = await org.key(['contacts:read', 'contacts:write']);
    const responses = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        i % 2
          ? small.call(key, 'GET', '/api/v1/contacts?limit=10')
          : small.call(key, 'POST', '/api/v1/contacts', { first_name: 'Pooled', email: `pooled-${i}@example.com` }),
      ),
    );
    expect(responses.map((res) => res.statusCode).sort()).toEqual([...Array(25).fill(200), ...Array(25).fill(201)]);
    const all = await small.call(key, 'GET', '/api/v1/contacts?limit=100');
    expect(all.json<{ data: unknown[] }>().data).toHaveLength(25);
  });

  it('runs the hot queries as named prepared statements, planned once per connection', async () => {
    // After the lists above, the pool's two connections (one query held on each by pg_sleep) hold
    // the contacts page as a prepared statement named by db/postgres.ts prepareOnPostgres.
    const held = await Promise.all(
      [0, 1].map(() =>
        sql<{
          statements: string[];
        }>`select array(select statement from pg_prepared_statements where name like 'orgdata_%') as statements, pg_sleep(0.1)`.execute(
          small.db.kysely,
        ),
      ),
    );
    const statements = held.flatMap((result) => result.rows[0]!.statements);
    // The contact's JSON text is put together in the statement (view.ts compactPostgresContactJson).
    expect(statements.some((text) => text.includes('{"object":"contact"') && text.includes('from "contacts"'))).toBe(true);
  });

  it('cancels a statement that runs past DATABASE_STATEMENT_TIMEOUT_MS', async () => {
    const started = Date.now();
    const error = await sql`select pg_sleep(5)`.execute(strict.db.kysely).then(
      () => null,
      (e: unknown) => e as { code?: string; message?: string },
    );
    expect(error).toMatchObject({ code: '57014' });
    expect(error?.message).toContain('statement timeout');
    expect(Date.now() - started).toBeLessThan(2000);
    // The connection is fine afterwards.
    expect((await sql<{ one: number }>`select 1 as one`.execute(strict.db.kysely)).rows).toEqual([{ one: 1 }]);
  });

  it('answers a request stuck behind a lock with a 503 problem document once the timeout passes, not a hang', async () => {
    const org = await strict.newOrg();
    const key = await org.key(['contacts:read', 'contacts:write']);
    const locker = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`LOCK TABLE ${strict.db.schema}.contacts IN ACCESS EXCLUSIVE MODE`);
      const started = Date.now();
      const [list, create] = await Promise.all([
        strict.call(key, 'GET', '/api/v1/contacts'),
        strict.call(key, 'POST', '/api/v1/contacts', { first_name: 'Locked', email: 'locked@example.com' }),
      ]);
      expect(Date.now() - started).toBeLessThan(3000);
      for (const res of [list, create]) {
        expect(res.statusCode, res.body).toBe(503);
        expect(res.headers['retry-after']).toBe('1');
        expect(res.headers['content-type']).toContain('application/problem+json');
        expect(res.json()).toMatchObject({ status: 503, code: 'service_unavailable', request_id: res.headers['request-id'] });
      }
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    // Nothing was created, and the pool serves again.
    expect((await strict.call(key, 'GET', '/api/v1/contacts')).json()).toMatchObject({ data: [] });
    expect((await strict.call(key, 'POST', '/api/v1/contacts', { first_name: 'Free', email: 'locked@example.com' })).statusCode).toBe(201);
  });
});
