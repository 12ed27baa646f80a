import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { signedIn, type DashboardUser } from './helpers/browserSession.js';
import { addMember, ALL_SCOPES, DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { startReceiver } from './helpers/webhookReceiver.js';
import { endpointFor, workerFor } from './helpers/webhooks.js';

const WEBHOOKS = '/settings/developer/webhooks';
const secretIn = (body: string) => /<code id="new-secret">\s*(whsec_[A-Za-z0-9+/]{32})\s*<\/code>/.exec(body)?.[1];
const PUBLIC_URL = 'https://93.184.216.34/hooks/orgdata';

describe.each(DIALECTS)('dashboard webhooks on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let admin: DashboardUser;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg('Hooks Org');
    admin = await signedIn(h, org.adminEmail);
  });
  afterAll(() => h.close());

  const endpointRow = (url: string) =>
    h.db.kysely.selectFrom('webhook_endpoints').selectAll().where('org_id', '=', org.orgId).where('url', '=', url).executeTakeFirst();

  it('is reached from the Developer page', async () => {
    const developer = await admin.get('/settings/developer');
    expect(developer.body).toContain(`href="${WEBHOOKS}"`);
    const page = await admin.get(WEBHOOKS);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('No webhook endpoints yet.');
    expect(page.body).toContain('name="_csrf"');
  });

  it('creates an endpoint with chosen events, showing its secret once', async () => {
    const res = await admin.post(WEBHOOKS, { url: PUBLIC_URL, events: ['contact.*', 'group.member_added'] });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('You will not see it again');
    const secret = secretIn(res.body)!;
    expect(secret).toBeDefined();
    expect(res.body).toContain('data-copy="new-secret"');
    expect(res.headers.location).toBeUndefined();
    expect(String(res.headers['set-cookie'] ?? '')).not.toContain(secret);
    const row = await endpointRow(PUBLIC_URL);
    expect(row).toMatchObject({
      secret,
      status: 'enabled',
      created_by: org.adminId,
      events: JSON.stringify(['contact.*', 'group.member_added']),
    });

    const list = await admin.get(WEBHOOKS);
    expect(list.body).toContain(PUBLIC_URL);
    expect(list.body).toContain('contact.*');
    expect(list.body).not.toContain(secret);
  });

  it('refuses hostile URLs and an empty event selection, with messages next to the fields', async () => {
    for (const [url, message] of [
      ['http://93.184.216.34/hook', 'must use https'],
      ['https://169.254.169.254/latest', 'link-local'],
      ['https://[::ffff:127.0.0.1]/hook', 'loopback'],
      ['https://localhost./hook', 'loopback'],
      // A name that does not resolve (.invalid never does) gets the one message every host name
      // refused after a lookup gets: the form does not tell what a name resolves to here.
      ['https://nowhere.invalid/hook', 'its host must resolve, from this server, to public addresses only'],
    ]) {
      const res = await admin.post(WEBHOOKS, { url: url!, events: ['*'] });
      expect(res.statusCode, url).toBe(400);
      expect(res.body).toContain('id="f-url-error"');
      expect(res.body).toContain(message!);
      expect(secretIn(res.body)).toBeUndefined();
    }
    const none = await admin.post(WEBHOOKS, { url: PUBLIC_URL });
    expect(none.statusCode).toBe(400);
    expect(none.body).toContain('id="f-events-error"');
    const forged = await admin.post(WEBHOOKS, { url: PUBLIC_URL, events: ['contact.exploded'] });
    expect(forged.statusCode).toBe(400);
    expect(forged.body).toContain('Unknown event type or pattern contact.exploded;');
  });

  it('disables and enables, rolls the secret (shown once) and deletes after confirmation', async () => {
    const url = 'https://93.184.216.34/hooks/roll';
    const first = secretIn((await admin.post(WEBHOOKS, { url, events: ['*'] })).body)!;
    const { id } = (await endpointRow(url))!;

    expect((await admin.post(`${WEBHOOKS}/${id}/disable`)).statusCode).toBe(303);
    expect((await endpointRow(url))!.status).toBe('disabled');
    expect((await admin.get(`${WEBHOOKS}/${id}`)).body).toContain('Disabled by an admin');
    expect((await admin.post(`${WEBHOOKS}/${id}/enable`)).statusCode).toBe(303);
    expect((await endpointRow(url))!.status).toBe('enabled');

    const confirm = await admin.get(`${WEBHOOKS}/${id}/roll`);
    expect(confirm.body).toContain('keeps signing alongside it for 24 hours');
    const rolled = await admin.post(`${WEBHOOKS}/${id}/roll`);
    expect(rolled.statusCode).toBe(200);
    const second = secretIn(rolled.body)!;
    expect(second).toBeDefined();
    expect(second).not.toBe(first);
    expect(rolled.body).toContain('The previous secret keeps signing too until');
    expect(await endpointRow(url)).toMatchObject({ secret: second, previous_secret: first });
    expect((await admin.get(`${WEBHOOKS}/${id}`)).body).not.toContain(second);

    expect((await admin.get(`${WEBHOOKS}/${id}/delete`)).body).toContain('Delete the endpoint');
    expect(await endpointRow(url)).toBeDefined();
    expect((await admin.post(`${WEBHOOKS}/${id}/delete`)).statusCode).toBe(303);
    expect(await endpointRow(url)).toBeUndefined();
    expect((await admin.get(`${WEBHOOKS}/${id}`)).statusCode).toBe(404);
  });

  it('shows why an endpoint was disabled automatically', async () => {
    const url = 'https://93.184.216.34/hooks/dead';
    await admin.post(WEBHOOKS, { url, events: ['*'] });
    const reason = 'Disabled automatically on 2026-11-20: 100 deliveries in a row failed.';
    await h.db.kysely
      .updateTable('webhook_endpoints')
      .set({ status: 'disabled', disabled_reason: reason })
      .where('url', '=', url)
      .execute();
    expect((await admin.get(WEBHOOKS)).body).toContain(reason);
    expect((await admin.get(`${WEBHOOKS}/${(await endpointRow(url))!.id}`)).body).toContain(reason);
  });

  it('sends a test event, logs the attempt, and resends it', async () => {
    const receiver = await startReceiver();
    const endpoint = await endpointFor(h.db.kysely, org.orgId, receiver.url);
    receiver.secrets = [endpoint.secret];
    receiver.answer = () => ({ status: 200, body: 'thanks <b>really</b>' });
    const worker = workerFor(h.db.kysely);
    worker.start();
    try {
      expect((await admin.post(`${WEBHOOKS}/${endpoint.id}/test`)).statusCode).toBe(303);
      await receiver.until(() => receiver.received.length === 1);
      const ping = receiver.received[0]!;
      expect(ping.event.type).toBe('ping');
      expect(() => new Webhook(endpoint.secret).verify(ping.body, ping.headers as Record<string, string>)).not.toThrow();
      const msgId = String(ping.headers['webhook-id']);
      await expect.poll(async () => (await admin.get(`${WEBHOOKS}/${endpoint.id}`)).body).toContain(msgId);
      const detail = await admin.get(`${WEBHOOKS}/${endpoint.id}`);
      expect(detail.body).toContain('<strong>200</strong> OK');
      expect(detail.body).toContain('thanks &#60;b&#62;really&#60;/b&#62;');
      expect(detail.body).toContain('test event');

      expect((await admin.post(`${WEBHOOKS}/${endpoint.id}/deliveries/${msgId}/resend`)).statusCode).toBe(303);
      await receiver.until(() => receiver.received.length === 2);
      expect(receiver.received[1]!.headers['webhook-id']).toBe(msgId);
    } finally {
      await worker.stop(100);
      await receiver.close();
    }
  });

  it('lets no member, forged form or API key manage endpoints', async () => {
    const url = 'https://93.184.216.34/hooks/guarded';
    await admin.post(WEBHOOKS, { url, events: ['*'] });
    const { id } = (await endpointRow(url))!;
    const member = await addMember(h, org.orgId, 'member');
    const asMember = await signedIn(h, member.email);
    expect((await asMember.get(WEBHOOKS)).statusCode).toBe(403);
    expect((await asMember.get(`${WEBHOOKS}/${id}`)).statusCode).toBe(403);
    for (const path of [
      WEBHOOKS,
      `${WEBHOOKS}/${id}/disable`,
      `${WEBHOOKS}/${id}/roll`,
      `${WEBHOOKS}/${id}/delete`,
      `${WEBHOOKS}/${id}/test`,
    ]) {
      expect((await asMember.post(path, { url: 'https://93.184.216.34/sneaky', events: ['*'] })).statusCode, path).toBe(403);
      expect((await admin.post(path, { url: 'https://93.184.216.34/sneaky', events: ['*'] }, { csrf: 'forged' })).statusCode, path).toBe(
        403,
      );
    }
    expect(await endpointRow('https://93.184.216.34/sneaky')).toBeUndefined();
    expect((await endpointRow(url))!.status).toBe('enabled');

    // Another organisation's admin cannot see or touch it.
    const other = await h.newOrg('Other');
    const otherAdmin = await signedIn(h, other.adminEmail);
    expect((await otherAdmin.get(`${WEBHOOKS}/${id}`)).statusCode).toBe(404);
    expect((await otherAdmin.post(`${WEBHOOKS}/${id}/delete`)).statusCode).toBe(404);

    // There is no API for endpoints, and an API key does not open the dashboard.
    const key = await org.key(ALL_SCOPES);
    expect((await h.call(key, 'GET', '/api/v1/webhook_endpoints')).statusCode).toBe(404);
    expect((await h.call(key, 'POST', '/api/v1/webhook_endpoints', { url })).statusCode).toBe(404);
    const keyed = await h.app.inject({ method: 'POST', url: WEBHOOKS, headers: { authorization: `Bearer ${key}` }, payload: {} });
    expect(keyed.statusCode).toBe(401);
  });
});
