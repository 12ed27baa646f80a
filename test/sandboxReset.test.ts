import { existsSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR } from '../src/domain/events/memberEvents.js';
import { findSandbox } from '../src/domain/orgs/sandbox.js';
import { resetSandbox } from '../src/domain/orgs/sandboxReset.js';
import { createEndpoint } from '../src/domain/webhooks/endpoints.js';
import { openBlobStore } from '../src/infra/choose.js';
import { ALL_SCOPES, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

type Json = Record<string, unknown>;

describe.each(DIALECTS)('resetting the test data on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect, { env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
  });
  afterAll(() => h.close());

  /** A contact in a group with a label, and an uploaded file, made with `key`; the file's id. */
  async function fill(key: string): Promise<{ contact: string; file: string }> {
    const contact = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' })).json<Json>();
    const label = (await h.call(key, 'POST', '/api/v1/contacts/labels', { name: 'VIP' })).json<Json>();
    await h.call(key, 'PUT', `/api/v1/contacts/${String(contact.id)}/labels/${String(label.id)}`);
    const group = (await h.call(key, 'POST', '/api/v1/groups', { name: 'G' })).json<Json>();
    await h.call(key, 'POST', `/api/v1/groups/${String(group.id)}/members`, { contact_ids: [contact.id] });
    const file = (await h.call(key, 'POST', '/api/v1/files', { name: 'a.txt', content_type: 'text/plain', size: 3 })).json<Json>();
    const put = await h.app.inject({ method: 'PUT', url: new URL(String(file.upload_url)).pathname, payload: 'abc' });
    expect(put.statusCode).toBe(200);
    return { contact: String(contact.id), file: String(file.id) };
  }

  const count = async (key: string, url: string) =>
    (await h.call(key, 'GET', `/api/v1${url}?limit=100`)).json<{ data: unknown[] }>().data.length;

  it('deletes every contact, label, group, file (bytes too), event and delivery of the sandbox, and nothing live', async () => {
    const org: Org = await h.newOrg();
    const live = await org.key(ALL_SCOPES);
    const test = await org.key(ALL_SCOPES, { mode: 'test' });
    const sandbox = (await findSandbox(h.db.kysely, org.orgId))!;
    const operator = (orgId: string) => ({ db: h.db.kysely, orgId, actor: { kind: 'operator' as const }, now: new Date() });
    const policy = { allowPrivateUrls: true };
    await createEndpoint(operator(org.orgId), policy, { url: 'http://127.0.0.1:9/live' });
    await createEndpoint(operator(sandbox), policy, { url: 'http://127.0.0.1:9/test' });
    const liveIds = await fill(live);
    const testIds = await fill(test);
    const testFile = await h.db.kysely.selectFrom('files').select('storage_key').where('id', '=', testIds.file).executeTakeFirstOrThrow();
    const liveFile = await h.db.kysely.selectFrom('files').select('storage_key').where('id', '=', liveIds.file).executeTakeFirstOrThrow();
    const blobPath = (key: string | null) => path.join(h.config.dataDir, 'files', 'blobs', key!);
    expect(existsSync(blobPath(testFile.storage_key))).toBe(true);
    const deliveries = async (orgId: string) =>
      (await h.db.kysely.selectFrom('webhook_deliveries').select('id').where('org_id', '=', orgId).execute()).length;
    expect(await deliveries(sandbox)).toBeGreaterThan(0);
    const liveDeliveries = await deliveries(org.orgId);

    const reset = await resetSandbox(h.db.kysely, await openBlobStore(h.config), org.orgId, OPERATOR);
    expect(reset).toMatchObject({ contacts: 1, labels: 1, groups: 1, files: 1, api_keys: 0, webhook_endpoints: 0, bytes_pending: 0 });
    expect(reset.events).toBeGreaterThan(0);
    expect(reset.deliveries).toBeGreaterThan(0);

    for (const url of ['/contacts', '/contacts/labels', '/groups', '/files', '/events']) expect(await count(test, url), url).toBe(0);
    expect(existsSync(blobPath(testFile.storage_key))).toBe(false);
    expect(await deliveries(sandbox)).toBe(0);
    // Live data untouched; the sandbox's key and endpoint kept.
    for (const url of ['/contacts', '/contacts/labels', '/groups', '/files']) expect(await count(live, url), url).toBe(1);
    expect(existsSync(blobPath(liveFile.storage_key))).toBe(true);
    expect(await deliveries(org.orgId)).toBe(liveDeliveries);
    expect((await h.call(test, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    expect(await h.db.kysely.selectFrom('webhook_endpoints').select('id').where('org_id', '=', sandbox).execute()).toHaveLength(1);
    // Recorded in the live organisation's Activity, by whom.
    const recorded = await h.db.kysely
      .selectFrom('events')
      .select(['org_id', 'actor_type', 'data'])
      .where('type', '=', 'security.sandbox_reset')
      .execute();
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ org_id: org.orgId, actor_type: 'system' });
    expect(JSON.parse(recorded[0]!.data)).toMatchObject({ contacts: '1', files: '1' });
  });

  it('deletes the keys and endpoints only when asked; the keys stop working at once', async () => {
    const org = await h.newOrg();
    const live = await org.key(['contacts:read']);
    const test = await org.key(['contacts:read'], { mode: 'test' });
    expect((await h.call(test, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
    const reset = await resetSandbox(h.db.kysely, await openBlobStore(h.config), org.orgId, OPERATOR, { keys: true, endpoints: true });
    expect(reset.api_keys).toBe(1);
    expect((await h.call(test, 'GET', '/api/v1/contacts')).statusCode).toBe(401);
    expect((await h.call(live, 'GET', '/api/v1/contacts')).statusCode).toBe(200);
  });

  it("refuses a sandbox's own id, and an organisation there is not", async () => {
    const org = await h.newOrg();
    await org.key(['contacts:read'], { mode: 'test' });
    const sandbox = (await findSandbox(h.db.kysely, org.orgId))!;
    const blobs = await openBlobStore(h.config);
    await expect(resetSandbox(h.db.kysely, blobs, sandbox, OPERATOR)).rejects.toThrow(/No organisation/);
    await expect(resetSandbox(h.db.kysely, blobs, 'org_nothere', OPERATOR)).rejects.toThrow(/No organisation/);
  });
});
