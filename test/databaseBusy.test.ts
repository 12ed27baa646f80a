import path from 'node:path';
import SQLite from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { suiteServer } from './helpers/suiteServer.js';

/**
 * SQLite's write lock held longer than its busy timeout (5 s) by another process on the same file
 * (an operator's CLI, a backup): a write answers 503 `service_unavailable` with Retry-After, never
 * a 500, and writes nothing; once the lock is released the same request succeeds.
 */
describe('sqlite: with the write lock held by another process', () => {
  const suite = suiteServer('sqlite', {}, { org: true, stopWith: 'SIGKILL' });

  it('answers a write 503 service_unavailable with Retry-After, and writes nothing', async () => {
    const post = () =>
      fetch(`${suite.url}/api/v1/contacts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ first_name: 'Busy', email: 'busy@example.com' }),
        signal: AbortSignal.timeout(60_000),
      });
    const other = new SQLite(path.join(suite.env.env.DATA_DIR!, 'orgdata.sqlite'));
    try {
      other.exec('begin immediate');
      const res = await post();
      const body = (await res.json()) as { code: string };
      expect(res.status, JSON.stringify(body)).toBe(503);
      expect(body.code).toBe('service_unavailable');
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      other.exec('rollback');
      expect(other.prepare("select count(*) as n from contacts where email = 'busy@example.com'").get()).toEqual({ n: 0 });
    } finally {
      if (other.inTransaction) other.exec('rollback');
      other.close();
    }
    expect((await post()).status).toBe(201);
  }, 60_000);

  const keyedPost = (email: string, idempotencyKey: string) =>
    fetch(`${suite.url}/api/v1/contacts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
      body: JSON.stringify({ first_name: 'Busy', email }),
      signal: AbortSignal.timeout(60_000),
    });

  it('answers a keyed write 503 too, and the same key then runs once the lock is released (not held as in progress)', async () => {
    const other = new SQLite(path.join(suite.env.env.DATA_DIR!, 'orgdata.sqlite'));
    try {
      other.exec('begin immediate');
      const res = await keyedPost('keyed-busy@example.com', 'busy-key');
      expect(res.status, await res.text()).toBe(503);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
      other.exec('rollback');
    } finally {
      if (other.inTransaction) other.exec('rollback');
      other.close();
    }
    const again = await keyedPost('keyed-busy@example.com', 'busy-key');
    expect(again.status, await again.text()).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    const replay = await keyedPost('keyed-busy@example.com', 'busy-key');
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
  }, 60_000);

  it('waits for a lock released within the busy timeout rather than fail (keyed and not)', async () => {
    const other = new SQLite(path.join(suite.env.env.DATA_DIR!, 'orgdata.sqlite'));
    try {
      other.exec('begin immediate');
      const released = new Promise<void>((resolve) =>
        setTimeout(() => {
          other.exec('commit');
          resolve();
        }, 1000),
      );
      const [keyed, plain] = await Promise.all([
        keyedPost('waited-keyed@example.com', 'waited-key'),
        fetch(`${suite.url}/api/v1/contacts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${suite.org.key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ first_name: 'Waited', email: 'waited@example.com' }),
          signal: AbortSignal.timeout(60_000),
        }),
      ]);
      await released;
      expect([keyed.status, plain.status], `${await keyed.text()} ${await plain.text()}`).toEqual([201, 201]);
    } finally {
      if (other.inTransaction) other.exec('rollback');
      other.close();
    }
  }, 60_000);
});
