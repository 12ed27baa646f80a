import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, makeHarness, type Harness } from './helpers/harness.js';
import { startReceiver, type Receiver } from './helpers/webhookReceiver.js';
import { emit, endpointFor, workerFor } from './helpers/webhooks.js';
import type { Db } from '../src/db/database.js';

/**
 * Two instances over one PostgreSQL database, each running a delivery worker with its own
 * connection pool: they share the outbox, and in normal operation every event reaches the
 * endpoint exactly once (not once per instance).
 */
describe.skipIf(!process.env.TEST_DATABASE_URL)('two delivery workers on one PostgreSQL database', () => {
  let h: Harness;
  let second: Db;
  let receivers: Receiver[];
  beforeAll(async () => {
    h = await makeHarness('postgres');
    second = await freshDatabase('postgres', { schema: h.db.schema! });
    receivers = [await startReceiver(), await startReceiver()];
  });
  afterAll(async () => {
    await Promise.all(receivers.map((r) => r.close()));
    await second.close();
    await h.close();
  });

  it('delivers each event to each endpoint once, with both instances doing part of the work', async () => {
    const org = await h.newOrg();
    for (const receiver of receivers) {
      receiver.secrets = [(await endpointFor(h.db.kysely, org.orgId, receiver.url)).secret];
      // A little latency, so that both workers have claims to make while the other is sending.
      receiver.answer = () => ({ status: 200, delayMs: 3 });
    }
    const a = workerFor(h.db.kysely);
    const b = workerFor(second.kysely);
    a.start();
    b.start();
    try {
      const events: string[] = [];
      for (let i = 0; i < 10; i++) events.push(...(await emit(h.db.kysely, org.orgId, 60)));
      for (const receiver of receivers) {
        await receiver.until(() => receiver.received.length >= events.length, 60_000, 'every delivery');
        // Let a duplicate, if any, arrive.
        await new Promise((resolve) => setTimeout(resolve, 500));
        const ids = receiver.received.map((r) => r.event.id);
        expect(ids).toHaveLength(events.length);
        expect(new Set(ids)).toEqual(new Set(events));
        expect(new Set(receiver.received.map((r) => r.headers['webhook-id'])).size).toBe(events.length);
        expect(receiver.received.every((r) => r.verifiedWith !== null)).toBe(true);
      }
      expect(a.attempts + b.attempts).toBe(2 * events.length);
      expect(a.attempts).toBeGreaterThan(0);
      expect(b.attempts).toBeGreaterThan(0);
    } finally {
      await Promise.all([a.stop(100), b.stop(100)]);
    }
    const states = await h.db.kysely.selectFrom('webhook_deliveries').select('status').where('org_id', '=', org.orgId).execute();
    expect(states.every((s) => s.status === 'succeeded')).toBe(true);
  });
});
