import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addUser } from '../src/domain/orgs/orgs.js';
import { purgeOldRequests, requestUsage } from '../src/domain/requests/requestLog.js';
import { signedIn } from './helpers/browserSession.js';
import { ALL_SCOPES, DIALECT_FREE, DIALECTS, type Harness, makeHarness } from './helpers/harness.js';
import { cli, orgWithKey, serverEnv, startServerProcess } from './helpers/serverProcess.js';
import { cliEntry } from './helpers/cliEntry.js';

const run = promisify(execFile);
const CLI = cliEntry(path.resolve(import.meta.dirname, '..'));

/** The request log and usage (issue 20, items 3-4), through HTTP on both databases. */
describe.each(DIALECTS)('request log on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    // A burst of 5: the sixth request in a row is refused with 429 (rate_limited).
    h = await makeHarness(dialect, { env: { RATE_LIMIT_BURST: '5', RATE_LIMIT_PER_SECOND: '0.001' } });
  });
  afterAll(() => h.close());

  const logged = (requestId: string) =>
    h.db.kysely.selectFrom('request_log').selectAll().where('request_id', '=', requestId).executeTakeFirst();

  it('logs each request made with a key: route template, status, error code, never the body or the key', async () => {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    const { id: keyId } = await h.db.kysely.selectFrom('api_keys').select('id').where('org_id', '=', org.orgId).executeTakeFirstOrThrow();
    const created = await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Secret', email: 'private.person@example.com' });
    expect(created.statusCode).toBe(201);
    const missing = await h.call(key, 'GET', '/api/v1/contacts/con_00000000000000000000');
    const invalid = await h.call(key, 'POST', '/api/v1/contacts', { first_name: '' });
    const byEmail = await h.call(key, 'GET', '/api/v1/contacts?email=private.person%40example.com');
    const limited: Awaited<ReturnType<Harness['call']>>[] = [];
    for (let i = 0; i < 3; i++) limited.push(await h.call(key, 'GET', '/api/v1/contacts'));
    expect(limited.at(-1)!.statusCode).toBe(429);
    // A request without a valid key belongs to no organisation: not logged.
    const anonymous = await h.app.inject({ method: 'GET', url: '/api/v1/contacts', headers: { authorization: 'Bearer nope' } });
    expect(anonymous.statusCode).toBe(401);

    const id = (res: { headers: Record<string, unknown> }) => String(res.headers['request-id']);
    await expect.poll(() => logged(id(limited.at(-1)!)), { timeout: 5000 }).toBeTruthy();
    expect(await logged(id(created))).toMatchObject({
      org_id: org.orgId,
      key_id: keyId,
      method: 'POST',
      route: '/api/v1/contacts',
      status: 201,
      error_code: null,
    });
    expect(await logged(id(missing))).toMatchObject({ route: '/api/v1/contacts/:id', status: 404, error_code: 'not_found' });
    expect(await logged(id(invalid))).toMatchObject({ status: 400, error_code: 'invalid_request' });
    expect(await logged(id(limited.at(-1)!))).toMatchObject({ status: 429, error_code: 'rate_limited' });
    expect(await logged(id(anonymous))).toBeUndefined();
    const rows = await h.db.kysely.selectFrom('request_log').selectAll().where('org_id', '=', org.orgId).execute();
    expect(rows).toHaveLength(7);
    const text = JSON.stringify(rows);
    expect(text).not.toContain('private.person');
    expect(text).not.toContain(key);
    expect(text).not.toContain(key.slice(-12));
    expect(rows.every((r) => Number(r.duration_ms) >= 0 && r.origin.endsWith('lightMyRequest'))).toBe(true);
    // The query (here an e-mail address) is not kept: the route's template is.
    expect(await logged(id(byEmail))).toMatchObject({ route: '/api/v1/contacts', status: 200 });

    // Usage: the day's counts equal the requests made.
    const usage = await requestUsage(org.adminCtx(), 30);
    expect(usage.days).toHaveLength(30);
    expect(usage.days.at(-1)!.counts).toEqual({ '2xx': 3, '3xx': 0, '4xx': 2, '429': 2, '5xx': 0 });
    expect(usage.keys).toEqual([{ keyId, days: usage.days }]);
    expect(usage.quotaUsedToday).toBe(5);
  });

  it('shows admins the log, a request found by its id with the events it caused, and usage; members and other orgs see none of it', async () => {
    const org = await h.newOrg();
    const key = await org.key(ALL_SCOPES);
    const other = await h.newOrg();
    const otherKey = await other.key(ALL_SCOPES);
    const created = await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' });
    const theirs = await h.call(otherKey, 'GET', '/api/v1/contacts');
    const requestId = String(created.headers['request-id']);
    await expect.poll(() => logged(String(theirs.headers['request-id'])), { timeout: 5000 }).toBeTruthy();
    await expect.poll(() => logged(requestId), { timeout: 5000 }).toBeTruthy();

    const admin = await signedIn(h, org.adminEmail);
    const list = await admin.get('/settings/developer/logs');
    expect(list.statusCode).toBe(200);
    expect(list.body).toContain(requestId);
    expect(list.body).not.toContain(String(theirs.headers['request-id']));
    const found = await admin.get(`/settings/developer/logs?request_id=${encodeURIComponent(` ${requestId} `)}`);
    expect(found.statusCode).toBe(200);
    expect(found.body).toContain('contact.created');
    expect(found.body).toContain(created.json().id);
    // Another organisation's request is not found here.
    const foreign = await admin.get(`/settings/developer/logs?request_id=${String(theirs.headers['request-id'])}`);
    expect(foreign.statusCode).toBe(404);
    const filtered = await admin.get('/settings/developer/logs?status=4xx');
    expect(filtered.body).not.toContain(requestId);
    const usage = await admin.get('/settings/developer/usage');
    expect(usage.statusCode).toBe(200);
    expect(usage.body).toContain('<svg');
    expect(usage.body).toMatch(/<strong>1<\/strong> of 1,000,000 requests today/);

    await addUser(h.db.kysely, {
      orgId: org.orgId,
      email: `member-${org.orgId}@example.com`,
      password: 'correct horse battery',
      role: 'member',
    });
    const member = await signedIn(h, `member-${org.orgId}@example.com`);
    expect((await member.get('/settings/developer/logs')).statusCode).toBe(403);
    expect((await member.get('/settings/developer/usage')).statusCode).toBe(403);
    expect((await member.get(`/settings/developer/logs?request_id=${requestId}`)).statusCode).toBe(403);
  });

  it('purges rows older than REQUEST_LOG_DAYS and keeps the daily counts', async () => {
    const org = await h.newOrg();
    const row = (request_id: string, at: string) => ({
      request_id,
      org_id: org.orgId,
      key_id: 'key_x',
      at,
      method: 'GET',
      route: '/api/v1/contacts',
      status: 200,
      error_code: null,
      duration_ms: 1.5,
      origin: '127.0.0.0/24 · curl',
    });
    const now = new Date('2026-11-25T12:00:00.000Z');
    await h.db.kysely
      .insertInto('request_log')
      .values([row(`req_old_${org.orgId}`, '2026-11-17T11:59:59.000Z'), row(`req_new_${org.orgId}`, '2026-11-18T12:00:01.000Z')])
      .execute();
    expect(await purgeOldRequests(h.db.kysely, now, 7)).toBeGreaterThanOrEqual(1);
    expect(await logged(`req_old_${org.orgId}`)).toBeUndefined();
    expect(await logged(`req_new_${org.orgId}`)).toBeTruthy();
  });
});

describe.skipIf(!DIALECT_FREE)('orgdata requests show', { timeout: 120_000 }, () => {
  it('finds a request a caller quotes, with its events, from a real server that was just stopped', async () => {
    const env = await serverEnv('sqlite');
    try {
      const { key, keyId } = await orgWithKey(env.env);
      const server = await startServerProcess(env);
      let requestId: string;
      let contactId: string;
      let readId: string;
      try {
        const res = await fetch(`${env.url}/api/v1/contacts`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({ first_name: 'Quoted', email: 'quoted@example.com' }),
        });
        expect(res.status).toBe(201);
        requestId = res.headers.get('request-id')!;
        contactId = ((await res.json()) as { id: string }).id;
        const read = await fetch(`${env.url}/api/v1/contacts`, { headers: { authorization: `Bearer ${key}` } });
        expect(read.status).toBe(200);
        readId = read.headers.get('request-id')!;
      } finally {
        // At once: the row may still be waiting in memory; a shutdown writes it.
        server.child.kill('SIGTERM');
        await server.exited;
      }
      const shown = await cli<{ request: Record<string, unknown>; events: { type: string; data: { object: { id: string } } }[] }>(env.env, [
        'requests',
        'show',
        requestId,
      ]);
      expect(shown.request).toMatchObject({ request_id: requestId, key_id: keyId, method: 'POST', route: '/api/v1/contacts', status: 201 });
      expect(shown.events.map((e) => [e.type, e.data.object.id])).toEqual([['contact.created', contactId]]);
      // As text, a read request (no events) too: every line ends with a newline, the last one included.
      const { stdout } = await run(process.execPath, [...CLI, 'requests', 'show', readId], { env: env.env });
      expect(stdout).toMatch(new RegExp(`^${readId} .*\nGET /api/v1/contacts → 200 .*\nno events\n$`));
      await expect(cli(env.env, ['requests', 'show', 'req_nothere'])).rejects.toMatchObject({
        stdout: expect.stringContaining('"code":"not_found"'),
      });
    } finally {
      await env.dispose();
    }
  });
});
