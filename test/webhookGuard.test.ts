import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../src/domain/errors.js';
import { createEndpoint } from '../src/domain/webhooks/endpoints.js';
import { deliveryLog } from '../src/domain/webhooks/deliveries.js';
import { forbiddenRange, UNREACHABLE_HOST, vetWebhookUrl, type Resolve, type UrlPolicy } from '../src/domain/webhooks/urlGuard.js';
import { DeliveryWorker } from '../src/infra/webhooks/deliveryWorker.js';
import { makeHarness, type Harness } from './helpers/harness.js';
import { startReceiver } from './helpers/webhookReceiver.js';
import { emit, operator } from './helpers/webhooks.js';

/** A resolver for names of our own, as DNS would answer them (no network needed). */
function resolverOf(names: Record<string, string[]>): Resolve {
  return async (hostname) => {
    const addresses = names[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
}

const STRICT: UrlPolicy = { allowPrivateUrls: false, resolve: resolverOf({ 'public.example': ['93.184.216.34'] }) };

async function refusal(url: string, policy: UrlPolicy = STRICT): Promise<string> {
  try {
    await vetWebhookUrl(url, policy);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as ValidationError).errors[0]!.field).toBe('url');
    return (error as ValidationError).errors[0]!.message;
  }
  throw new Error(`${url} was accepted`);
}

describe('the SSRF guard of webhook URLs', () => {
  it.each([
    ['http://public.example/hook', 'must use https'],
    ['https://127.0.0.1/hook', 'loopback'],
    ['https://[::1]/hook', 'loopback'],
    ['https://[::ffff:127.0.0.1]/hook', 'loopback address (IPv4 127.0.0.1 in IPv6 form)'],
    ['https://[::127.0.0.1]/hook', 'loopback address (IPv4 127.0.0.1 in IPv6 form)'],
    ['https://2130706433/hook', 'loopback'],
    ['https://0177.0.0.1/hook', 'loopback'],
    ['https://0x7f.0.0.1/hook', 'loopback'],
    ['https://127.1/hook', 'loopback'],
    ['https://localhost./hook', 'loopback'],
    ['https://localhost/hook', 'loopback'],
    ['https://api.localhost/hook', 'loopback'],
    ['https://169.254.169.254/latest/meta-data', 'link-local'],
    ['https://[fe80::1]/hook', 'link-local'],
    ['https://10.0.0.1/hook', 'private'],
    ['https://172.16.5.4/hook', 'private'],
    ['https://192.168.1.1/hook', 'private'],
    ['https://[fd00::1]/hook', 'private (unique local, fc00::/7)'],
    ['https://[::ffff:10.0.0.1]/hook', 'private address (IPv4 10.0.0.1 in IPv6 form)'],
    ['https://100.64.0.1/hook', 'carrier-grade NAT'],
    ['https://0.0.0.0/hook', 'unspecified'],
    ['https://[::]/hook', 'unspecified'],
    ['https://224.0.0.1/hook', 'multicast'],
    ['https://[ff02::1]/hook', 'multicast'],
    ['https://255.255.255.255/hook', 'broadcast'],
    ['https://user:pw@public.example/hook', 'user name or password'],
    ['ftp://public.example/hook', 'https://'],
    ['not a url', 'absolute URL'],
  ])('refuses %s, naming the rule', async (url, rule) => {
    expect(await refusal(url)).toContain(rule);
  });

  it('refuses a name that resolves to a forbidden address, to any among several, or to nothing, with one message that tells nothing of the answer', async () => {
    const policy = {
      allowPrivateUrls: false,
      resolve: resolverOf({ 'rebind.example': ['127.0.0.1'], 'mixed.example': ['93.184.216.34', '10.1.2.3'], 'empty.example': [] }),
    };
    const messages = new Set<string>();
    for (const host of ['rebind.example', 'mixed.example', 'nowhere.example', 'empty.example']) {
      const message = await refusal(`https://${host}/hook`, policy);
      expect(message).not.toMatch(/127\.0\.0\.1|10\.1\.2\.3|loopback|private|ENOTFOUND|resolves to/);
      messages.add(message);
    }
    expect([...messages]).toEqual([UNREACHABLE_HOST]);
  });

  it('refuses the system resolver’s localhost too', async () => {
    expect(await refusal('https://localhost:8443/hook', { allowPrivateUrls: false })).toContain('loopback');
  });

  it('accepts public addresses and names, and everything with WEBHOOK_ALLOW_PRIVATE_URLS', async () => {
    await expect(vetWebhookUrl('https://public.example/hook?x=1', STRICT)).resolves.toMatchObject({
      address: { address: '93.184.216.34' },
    });
    await expect(vetWebhookUrl('https://[2606:4700::1111]/hook', STRICT)).resolves.toBeTruthy();
    await expect(vetWebhookUrl('http://127.0.0.1:9/hook', { allowPrivateUrls: true })).resolves.toBeTruthy();
    await expect(vetWebhookUrl('https://10.0.0.1/hook', { allowPrivateUrls: true })).resolves.toBeTruthy();
    expect(forbiddenRange('8.8.8.8')).toBeNull();
    expect(forbiddenRange('64:ff9b::7f00:1')).toContain('loopback');
    expect(forbiddenRange('2002:a00:1::')).toContain('private');
  });
});

describe('the guard at creation and at every delivery', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness('sqlite');
  });
  afterAll(() => h.close());

  it('refuses to create an endpoint with a hostile URL, with a ValidationError on url', async () => {
    const org = await h.newOrg();
    await expect(createEndpoint(operator(h.db.kysely, org.orgId), STRICT, { url: 'https://0x7f.0.0.1/hook' })).rejects.toThrow(
      'url: must not point to a loopback address: 127.0.0.1',
    );
    expect(await h.db.kysely.selectFrom('webhook_endpoints').select('id').where('org_id', '=', org.orgId).execute()).toHaveLength(0);
  });

  it('checks again before each delivery: a name that now resolves to loopback is not sent to', async () => {
    const org = await h.newOrg();
    const receiver = await startReceiver();
    const endpoint = await createEndpoint(operator(h.db.kysely, org.orgId), STRICT, { url: 'https://public.example/hook' });
    // Someone changed the DNS record since: it now points at this machine.
    const worker = new DeliveryWorker({
      db: h.db.kysely,
      policy: { retrySchedule: [60], disableAfterFailures: 100 },
      urlPolicy: { allowPrivateUrls: false, resolve: resolverOf({ 'public.example': ['127.0.0.1'] }) },
      timeoutMs: 2000,
      log: { warn: () => {} },
    });
    await emit(h.db.kysely, org.orgId, 1);
    worker.start();
    try {
      const ctx = operator(h.db.kysely, org.orgId);
      await expect.poll(async () => (await deliveryLog(ctx, endpoint.id)).attempts.length).toBe(1);
      const [attempt] = (await deliveryLog(ctx, endpoint.id)).attempts;
      expect(attempt!.status_code).toBeNull();
      expect(attempt!.error).toBe(`not sent: url: ${UNREACHABLE_HOST}`);
      expect(receiver.received).toHaveLength(0);
    } finally {
      await worker.stop(100);
      await receiver.close();
    }
  });

  it('connects to the address it checked, keeping the URL’s host name', async () => {
    const org = await h.newOrg();
    const receiver = await startReceiver();
    const port = new URL(receiver.url).port;
    // `hooks.internal` is known to this resolver only: the connection must use the checked address.
    const policy = { allowPrivateUrls: true, resolve: resolverOf({ 'hooks.internal': ['127.0.0.1'] }) };
    const endpoint = await createEndpoint(operator(h.db.kysely, org.orgId), policy, { url: `http://hooks.internal:${port}/hook` });
    receiver.secrets = [endpoint.secret];
    const worker = new DeliveryWorker({
      db: h.db.kysely,
      policy: { retrySchedule: [60], disableAfterFailures: 100 },
      urlPolicy: policy,
      timeoutMs: 2000,
      log: { warn: () => {} },
    });
    await emit(h.db.kysely, org.orgId, 1);
    worker.start();
    try {
      await receiver.until(() => receiver.received.length === 1);
      expect(receiver.received[0]!.headers.host).toBe(`hooks.internal:${port}`);
      expect(receiver.received[0]!.verifiedWith).toBe(endpoint.secret);
    } finally {
      await worker.stop(100);
      await receiver.close();
    }
  });
});
