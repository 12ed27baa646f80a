import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Orgdata, WebhookVerificationError, type WebhookEvent } from '../src/index.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

const secret = `whsec_${randomBytes(24).toString('base64')}`;
const body = JSON.stringify({
  object: 'event',
  id: 'evt_1',
  type: 'contact.created',
  created_at: '2026-01-01T00:00:00.000Z',
  data: { object: {} },
});

/** Headers as the `standardwebhooks` library signs them (what the server uses to sign). */
function signed(payload: string, at = new Date(), secrets = [secret], id = 'msg_0123456789') {
  return {
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': secrets.map((s) => new Webhook(s).sign(id, at, payload)).join(' '),
  };
}

describe('Orgdata.webhooks.verify', () => {
  afterEach(() => vi.useRealTimers());

  it('reproduces the Standard Webhooks test vector', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(1614265330 * 1000);
    const event = Orgdata.webhooks.verify(
      '{"test": 2432232314}',
      {
        'webhook-id': 'msg_p5jXN8AQM9LWM0D4loKWxJek',
        'webhook-timestamp': '1614265330',
        'webhook-signature': 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
      },
      'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
    );
    expect(event).toEqual({ test: 2432232314 });
  });

  it('accepts what the standardwebhooks library signs: string or bytes, plain headers or a Headers object', () => {
    const headers = signed(body);
    expect(Orgdata.webhooks.verify(body, headers, secret)).toEqual(JSON.parse(body));
    expect(Orgdata.webhooks.verify(Buffer.from(body), new Headers(headers), secret).id).toBe('evt_1');
    const upper = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v]));
    expect(Orgdata.webhooks.verify(new TextEncoder().encode(body), upper, secret).type).toBe('contact.created');
    // And the library accepts the same delivery: both sides agree on the format.
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('accepts any one of several space-separated signatures (a secret being rolled)', () => {
    const old = `whsec_${randomBytes(24).toString('base64')}`;
    expect(Orgdata.webhooks.verify(body, signed(body, new Date(), [old, secret]), secret).id).toBe('evt_1');
    expect(Orgdata.webhooks.verify(body, signed(body, new Date(), [old, secret]), old).id).toBe('evt_1');
    const headers = signed(body);
    headers['webhook-signature'] = `v2,abc v1,bm9wZQ== ${headers['webhook-signature']}`;
    expect(Orgdata.webhooks.verify(body, headers, secret).id).toBe('evt_1');
  });

  it('refuses a tampered body, a wrong secret, another message id, and missing headers', () => {
    const headers = signed(body);
    expect(() => Orgdata.webhooks.verify(body.replace('evt_1', 'evt_2'), headers, secret)).toThrow(WebhookVerificationError);
    expect(() => Orgdata.webhooks.verify(`${body} `, headers, secret)).toThrow(WebhookVerificationError);
    expect(() => Orgdata.webhooks.verify(body, headers, `whsec_${randomBytes(24).toString('base64')}`)).toThrow(/signature/);
    expect(() => Orgdata.webhooks.verify(body, { ...headers, 'webhook-id': 'msg_other' }, secret)).toThrow(WebhookVerificationError);
    expect(() => Orgdata.webhooks.verify(body, { ...headers, 'webhook-signature': 'v1,' }, secret)).toThrow(WebhookVerificationError);
    const { 'webhook-signature': _dropped, ...unsigned } = headers;
    expect(() => Orgdata.webhooks.verify(body, unsigned, secret)).toThrow(/Missing/);
  });

  it('refuses an old or a future timestamp (300 s by default, configurable)', () => {
    const old = signed(body, new Date(Date.now() - 301_000));
    expect(() => Orgdata.webhooks.verify(body, old, secret)).toThrow(/too old/);
    expect(Orgdata.webhooks.verify(body, old, secret, { toleranceSeconds: 600 }).id).toBe('evt_1');
    expect(() => Orgdata.webhooks.verify(body, signed(body, new Date(Date.now() + 301_000)), secret)).toThrow(/future/);
    expect(() => Orgdata.webhooks.verify(body, { ...signed(body), 'webhook-timestamp': 'soon' }, secret)).toThrow(WebhookVerificationError);
  });

  it('never puts the secret in its error', () => {
    try {
      Orgdata.webhooks.verify(body, signed(body), `whsec_${randomBytes(24).toString('base64')}`);
      expect.fail('should throw');
    } catch (error) {
      expect(String(error)).not.toContain(secret.slice(6));
      expect(JSON.stringify(error)).not.toContain(secret.slice(6));
    }
  });
});

describe('a real delivery (server with a webhook endpoint)', () => {
  let server: OrgdataServer;
  let receiver: http.Server;
  const received: { body: string; headers: http.IncomingHttpHeaders; path?: string }[] = [];

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        received.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers, path: req.url });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    server = await startServer({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await new Promise((resolve) => receiver.close(resolve));
  });

  it('verifies what the server sends, and the event equals GET /events/{id}', async () => {
    const { port } = receiver.address() as AddressInfo;
    const endpoint = await server.cli<{ secret: string }>([
      'webhooks',
      'create',
      '--org',
      server.orgId,
      '--url',
      `http://127.0.0.1:${port}/hook`,
    ]);
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    const contact = await orgdata.contacts.create({ first_name: 'Hedy', email: 'hedy@example.com' });
    await vi.waitFor(() => expect(received.length).toBeGreaterThan(0), { timeout: 20_000, interval: 100 });

    const delivery = received[0]!;
    const event: WebhookEvent = Orgdata.webhooks.verify(delivery.body, delivery.headers, endpoint.secret);
    expect(event).toMatchObject({ type: 'contact.created', data: { object: { id: contact.id } } });
    expect(await orgdata.events.get(event.id)).toEqual(event);
    expect(() => Orgdata.webhooks.verify(delivery.body.replace('Hedy', 'Hedx'), delivery.headers, endpoint.secret)).toThrow(
      WebhookVerificationError,
    );
    expect(event.livemode).toBe(true);
    expect(orgdata.livemode).toBe(true);
  }, 40_000);

  it('in test mode: an od_test_ key, its sandbox endpoint, and livemode false kept by verify', async () => {
    const { port } = receiver.address() as AddressInfo;
    const endpoint = await server.cli<{ secret: string }>([
      'webhooks',
      'create',
      '--org',
      server.orgId,
      '--url',
      `http://127.0.0.1:${port}/test-hook`,
      '--test',
    ]);
    const key = await server.cli<{ key: string; mode: string }>([
      'keys',
      'create',
      '--org',
      server.orgId,
      '--admin-email',
      server.adminEmail,
      '--name',
      'test mode',
      '--scopes',
      'contacts:write',
      '--test',
    ]);
    expect(key).toMatchObject({ mode: 'test', key: expect.stringMatching(/^od_test_[A-Za-z0-9]{43}$/) });
    const orgdata = new Orgdata({ apiKey: key.key, baseUrl: server.baseUrl });
    expect(orgdata.livemode).toBe(false);
    const before = received.length;
    const contact = await orgdata.contacts.create({ first_name: 'Grace', email: 'grace@example.com' });
    await vi.waitFor(() => expect(received.some((r) => r.path === '/test-hook')).toBe(true), { timeout: 20_000, interval: 100 });
    const delivery = received.find((r) => r.path === '/test-hook')!;
    const event = Orgdata.webhooks.verify(delivery.body, delivery.headers, endpoint.secret);
    expect(event).toMatchObject({ type: 'contact.created', livemode: false, data: { object: { id: contact.id } } });
    expect(await orgdata.events.get(event.id)).toEqual(event);
    // The live endpoint heard nothing of it, and the live key does not see the contact.
    expect(received.slice(before).filter((r) => r.path !== '/test-hook')).toEqual([]);
    const live = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
    await expect(live.contacts.get(contact.id)).rejects.toMatchObject({ status: 404 });
  }, 60_000);
});
