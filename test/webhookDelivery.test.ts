import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Webhook } from 'standardwebhooks';
import { getEndpoint, rollSecret } from '../src/domain/webhooks/endpoints.js';
import { deliveryLog, resendDelivery, sendTestEvent } from '../src/domain/webhooks/deliveries.js';
import { purgeOldDeliveries } from '../src/domain/webhooks/outbox.js';
import type { DeliveryWorker } from '../src/infra/webhooks/deliveryWorker.js';
import { DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/webhookReceiver.js';
import { emit, endpointFor, operator, workerFor } from './helpers/webhooks.js';

/** Deliveries through real HTTP to a local receiver that verifies with the standardwebhooks library. */
describe.each(DIALECTS)('webhook delivery on %s', (dialect) => {
  let h: Harness;
  let receiver: Receiver;
  const workers: DeliveryWorker[] = [];
  const receivers: Receiver[] = [];

  const worker = (env: Record<string, string> = {}) => {
    const w = workerFor(h.db.kysely, env);
    workers.push(w);
    w.start();
    return w;
  };
  const newReceiver = async () => {
    const r = await startReceiver();
    receivers.push(r);
    return r;
  };
  /** A fresh organisation with one endpoint pointing at a fresh receiver. */
  async function setup(events?: string[]) {
    const org = await h.newOrg();
    receiver = await newReceiver();
    const endpoint = await endpointFor(h.db.kysely, org.orgId, receiver.url, events);
    receiver.secrets = [endpoint.secret];
    return { orgId: org.orgId, endpoint };
  }
  const delivery = (id: string) => h.db.kysely.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.stop(100)));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  afterAll(() => h.close());

  it('POSTs the event JSON, signed so that standardwebhooks verifies it, and records the attempt', async () => {
    const { orgId, endpoint } = await setup();
    const [eventId] = await emit(h.db.kysely, orgId, 1);
    worker();
    await receiver.until(() => receiver.received.length === 1);
    const got = receiver.received[0]!;
    expect(got.verifiedWith).toBe(endpoint.secret);
    const row = await h.db.kysely.selectFrom('events').selectAll().where('id', '=', eventId!).executeTakeFirstOrThrow();
    expect(JSON.parse(got.body)).toEqual({
      object: 'event',
      id: eventId,
      type: 'contact.created',
      created_at: row.created_at,
      livemode: true,
      // emit() acts as the dashboard user usr_test in request 'test'.
      actor: { type: 'user', id: 'usr_test' },
      request_id: 'test',
      data: JSON.parse(row.data),
    });
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['user-agent']).toMatch(/^orgdata-webhooks\/\d+\.\d+\.\d+/);
    expect(got.headers['webhook-id']).toMatch(/^msg_[0-9A-Za-z]{20}$/);
    expect(Math.abs(Number(got.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(5);
    expect(String(got.headers['webhook-signature'])).toMatch(/^v1,[A-Za-z0-9+/=]+$/);
    // A tampered body does not verify.
    expect(() =>
      new Webhook(endpoint.secret).verify(got.body.replace('contact', 'kontact'), got.headers as Record<string, string>),
    ).toThrow();

    const msgId = String(got.headers['webhook-id']);
    await expect.poll(async () => (await delivery(msgId)).status).toBe('succeeded');
    const log = await deliveryLog(operator(h.db.kysely, orgId), endpoint.id);
    expect(log.attempts).toHaveLength(1);
    expect(log.attempts[0]).toMatchObject({ delivery_id: msgId, event_id: eventId, status_code: 200, error: null, response_excerpt: 'ok' });
    expect(log.pending).toBe(0);
  });

  it('retries on the schedule (500, 500, then 200), same webhook-id, then stops', async () => {
    const { orgId, endpoint } = await setup();
    receiver.answer = (_r, nth) => (nth < 2 ? { status: 500, body: 'boom '.repeat(400) } : { status: 200, body: 'ok' });
    await emit(h.db.kysely, orgId, 1);
    worker({ WEBHOOK_RETRY_SCHEDULE: '1,1,1' });
    await receiver.until(() => receiver.received.length === 3, 15_000);
    const [a, b, c] = receiver.received;
    expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const gap of [b!.at - a!.at, c!.at - b!.at]) {
      // 1 s ± 10 % jitter, plus at most a poll interval and a write.
      expect(gap).toBeGreaterThanOrEqual(880);
      expect(gap).toBeLessThan(1800);
    }
    const msgId = String(a!.headers['webhook-id']);
    await expect.poll(async () => (await delivery(msgId)).status).toBe('succeeded');
    expect((await delivery(msgId)).attempts).toBe(3);
    const log = await deliveryLog(operator(h.db.kysely, orgId), endpoint.id);
    expect(log.attempts.map((x) => x.status_code)).toEqual([200, 500, 500]);
    // The first 1 KiB of the answer, no more.
    expect(log.attempts[1]!.response_excerpt).toHaveLength(1024);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(receiver.received).toHaveLength(3);
  });

  it('marks a delivery failed after the last retry', async () => {
    const { orgId } = await setup();
    receiver.answer = () => ({ status: 503 });
    await emit(h.db.kysely, orgId, 1);
    worker({ WEBHOOK_RETRY_SCHEDULE: '1' });
    await receiver.until(() => receiver.received.length === 2, 10_000);
    const msgId = String(receiver.received[0]!.headers['webhook-id']);
    await expect.poll(async () => (await delivery(msgId)).status).toBe('failed');
    expect(await delivery(msgId)).toMatchObject({ attempts: 2, last_status: 503, lease_until: null });
  });

  it('does not follow a redirect: it is a failed attempt', async () => {
    const { orgId, endpoint } = await setup();
    receiver.answer = () => ({ status: 302, headers: { location: `${receiver.url}/moved` } });
    await emit(h.db.kysely, orgId, 1);
    worker({ WEBHOOK_RETRY_SCHEDULE: '60' });
    await expect.poll(async () => (await deliveryLog(operator(h.db.kysely, orgId), endpoint.id)).attempts.length).toBe(1);
    const [attempt] = (await deliveryLog(operator(h.db.kysely, orgId), endpoint.id)).attempts;
    expect(attempt).toMatchObject({ status_code: 302, delivery_status: 'pending' });
    expect(attempt!.error).toContain('redirect');
    expect(attempt!.error).toContain('not followed');
    expect(receiver.received).toHaveLength(1);
  });

  it('counts no answer within WEBHOOK_TIMEOUT_SECONDS as a failed attempt', async () => {
    const { orgId, endpoint } = await setup();
    receiver.answer = () => ({ status: 200, delayMs: 3000 });
    await emit(h.db.kysely, orgId, 1);
    worker({ WEBHOOK_TIMEOUT_SECONDS: '1', WEBHOOK_RETRY_SCHEDULE: '60' });
    await expect
      .poll(async () => (await deliveryLog(operator(h.db.kysely, orgId), endpoint.id)).attempts.length, { timeout: 5000 })
      .toBe(1);
    const [attempt] = (await deliveryLog(operator(h.db.kysely, orgId), endpoint.id)).attempts;
    expect(attempt).toMatchObject({ status_code: null, error: 'no answer within 1 s', delivery_status: 'pending' });
    expect(attempt!.latency_ms).toBeGreaterThanOrEqual(950);
    expect(attempt!.latency_ms).toBeLessThan(2000);
  });

  it('counts a refused connection as a failed attempt', async () => {
    const org = await h.newOrg();
    const closed = await startReceiver();
    await closed.close();
    const endpoint = await endpointFor(h.db.kysely, org.orgId, closed.url);
    await emit(h.db.kysely, org.orgId, 1);
    worker({ WEBHOOK_RETRY_SCHEDULE: '60' });
    await expect.poll(async () => (await deliveryLog(operator(h.db.kysely, org.orgId), endpoint.id)).attempts.length).toBe(1);
    const [attempt] = (await deliveryLog(operator(h.db.kysely, org.orgId), endpoint.id)).attempts;
    expect(attempt).toMatchObject({ status_code: null, error: 'connection refused', response_excerpt: null });
  });

  it('disables an endpoint after WEBHOOK_DISABLE_AFTER_FAILURES failed deliveries, and sends it nothing more', async () => {
    const { orgId, endpoint } = await setup();
    receiver.answer = () => ({ status: 500 });
    await emit(h.db.kysely, orgId, 3);
    worker({ WEBHOOK_DISABLE_AFTER_FAILURES: '3', WEBHOOK_RETRY_SCHEDULE: '0.2' });
    await expect
      .poll(async () => (await getEndpoint(operator(h.db.kysely, orgId), endpoint.id)).status, { timeout: 10_000 })
      .toBe('disabled');
    const view = await getEndpoint(operator(h.db.kysely, orgId), endpoint.id);
    expect(view.disabled_reason).toMatch(/Disabled automatically on \d{4}-\d\d-\d\d: 3 deliveries in a row failed/);
    expect(receiver.received).toHaveLength(6);
    // Events after the endpoint was disabled are not queued for it; nothing else is sent.
    await emit(h.db.kysely, orgId, 2);
    await new Promise((resolve) => setTimeout(resolve, 800));
    expect(receiver.received).toHaveLength(6);
  });

  it('disables an endpoint whose every attempt has failed for 3 days', async () => {
    const { orgId, endpoint } = await setup();
    receiver.answer = () => ({ status: 500 });
    const fourDaysAgo = new Date(Date.now() - 4 * 86_400_000).toISOString();
    await h.db.kysely.updateTable('webhook_endpoints').set({ failing_since: fourDaysAgo }).where('id', '=', endpoint.id).execute();
    await emit(h.db.kysely, orgId, 1);
    worker({ WEBHOOK_RETRY_SCHEDULE: '60' });
    await expect.poll(async () => (await getEndpoint(operator(h.db.kysely, orgId), endpoint.id)).status).toBe('disabled');
    expect((await getEndpoint(operator(h.db.kysely, orgId), endpoint.id)).disabled_reason).toContain(
      'every delivery attempt has failed for 3 days',
    );
  });

  it('a success clears the failure record', async () => {
    const { orgId, endpoint } = await setup();
    await h.db.kysely
      .updateTable('webhook_endpoints')
      .set({ consecutive_failures: 7, failing_since: new Date().toISOString() })
      .where('id', '=', endpoint.id)
      .execute();
    await emit(h.db.kysely, orgId, 1);
    worker();
    await receiver.until(() => receiver.received.length === 1);
    await expect
      .poll(async () =>
        h.db.kysely
          .selectFrom('webhook_endpoints')
          .select(['consecutive_failures', 'failing_since'])
          .where('id', '=', endpoint.id)
          .executeTakeFirst(),
      )
      .toEqual({ consecutive_failures: 0, failing_since: null });
  });

  it('a slow endpoint does not delay a fast one', async () => {
    const org = await h.newOrg();
    const slow = await newReceiver();
    const fast = await newReceiver();
    slow.answer = () => ({ status: 200, delayMs: 4000 });
    await endpointFor(h.db.kysely, org.orgId, slow.url);
    await endpointFor(h.db.kysely, org.orgId, fast.url);
    await emit(h.db.kysely, org.orgId, 40);
    const started = Date.now();
    worker();
    await fast.until(() => fast.received.length === 40, 3500, 'the fast endpoint');
    expect(Date.now() - started).toBeLessThan(3500);
    // The slow one has 8 requests open (its per-endpoint limit), none answered yet.
    expect(slow.received.length).toBeLessThanOrEqual(8);
  });

  it('sends a test ping and resends a delivery with the same webhook-id', async () => {
    const { orgId, endpoint } = await setup();
    const ctx = operator(h.db.kysely, orgId);
    const { delivery_id } = await sendTestEvent(ctx, endpoint.id);
    worker();
    await receiver.until(() => receiver.received.length === 1);
    const ping = receiver.received[0]!;
    expect(ping.verifiedWith).toBe(endpoint.secret);
    expect(ping.headers['webhook-id']).toBe(delivery_id);
    expect(ping.event).toMatchObject({
      object: 'event',
      type: 'ping',
      livemode: true,
      data: { object: { object: 'webhook_endpoint', id: endpoint.id, url: receiver.url } },
    });
    await expect.poll(async () => (await delivery(delivery_id)).status).toBe('succeeded');

    expect(await resendDelivery(ctx, endpoint.id, delivery_id)).toBe(true);
    await receiver.until(() => receiver.received.length === 2);
    expect(receiver.received[1]!.headers['webhook-id']).toBe(delivery_id);
    expect(receiver.received[1]!.body).toBe(ping.body);
    await expect.poll(async () => (await deliveryLog(ctx, endpoint.id)).attempts.length).toBe(2);
  });

  it('signs with both secrets for a day after a roll', async () => {
    const { orgId, endpoint } = await setup();
    const rolled = await rollSecret(operator(h.db.kysely, orgId), endpoint.id);
    expect(rolled.secret).not.toBe(endpoint.secret);
    expect(rolled.secret).toMatch(/^whsec_[A-Za-z0-9+/]{32}$/);
    expect(Date.parse(rolled.previous_secret_expires_at!) - Date.now()).toBeGreaterThan(23.9 * 3_600_000);
    await emit(h.db.kysely, orgId, 1);
    worker();
    await receiver.until(() => receiver.received.length === 1);
    const got = receiver.received[0]!;
    expect(String(got.headers['webhook-signature']).split(' ')).toHaveLength(2);
    for (const secret of [endpoint.secret, rolled.secret]) {
      expect(() => new Webhook(secret).verify(got.body, got.headers as Record<string, string>)).not.toThrow();
    }
  });

  it('on stop, gives back the deliveries it had not sent yet', async () => {
    const { orgId } = await setup();
    receiver.answer = () => ({ status: 200, delayMs: 1500 });
    await emit(h.db.kysely, orgId, 30);
    const w = worker();
    await receiver.until(() => receiver.received.length === 8);
    await w.stop(3000);
    workers.splice(workers.indexOf(w), 1);
    const rows = await h.db.kysely.selectFrom('webhook_deliveries').select(['status', 'lease_until']).where('org_id', '=', orgId).execute();
    expect(rows.filter((r) => r.status === 'succeeded')).toHaveLength(8);
    expect(rows.filter((r) => r.status === 'pending' && r.lease_until === null)).toHaveLength(22);
  });

  it('fails a delivery whose event was purged, and purges deliveries past the retention with their attempts', async () => {
    const { orgId } = await setup();
    const [gone, kept] = await emit(h.db.kysely, orgId, 2);
    await h.db.kysely.deleteFrom('events').where('id', '=', gone!).execute();
    worker();
    await receiver.until(() => receiver.received.length === 1);
    expect(receiver.received[0]!.event.id).toBe(kept);
    const orphan = () => h.db.kysely.selectFrom('webhook_deliveries').selectAll().where('event_id', '=', gone!).executeTakeFirstOrThrow();
    await expect.poll(async () => (await orphan()).status).toBe('failed');
    expect((await orphan()).last_error).toContain('the event no longer exists');

    const sent = String(receiver.received[0]!.headers['webhook-id']);
    await expect.poll(async () => (await delivery(sent)).status).toBe('succeeded');
    const old = new Date(Date.now() - 31 * 86_400_000).toISOString();
    await h.db.kysely.updateTable('webhook_deliveries').set({ next_attempt_at: old }).where('org_id', '=', orgId).execute();
    expect(await purgeOldDeliveries(h.db.kysely, new Date(), 30)).toBeGreaterThanOrEqual(2);
    expect(await h.db.kysely.selectFrom('webhook_deliveries').select('id').where('org_id', '=', orgId).execute()).toEqual([]);
    expect(await h.db.kysely.selectFrom('webhook_attempts').select('id').where('org_id', '=', orgId).execute()).toEqual([]);
  });
});
