import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DIALECTS } from './helpers/harness.js';
import { cli, orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';
import { startReceiver, type Receiver } from './helpers/webhookReceiver.js';

/**
 * Deliveries live in the database, not in memory: a real `orgdata serve` is killed (-9, then
 * SIGTERM) while it is working through a backlog, restarted on the same database, and every event
 * still reaches the endpoint at least once, correctly signed.
 */
const CONTACTS = 240;

describe.each(DIALECTS)('webhook deliveries across restarts on %s', (dialect) => {
  let server: ServerEnv;
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
    // Answers take a while, so that the backlog is still there when the process dies.
    receiver.answer = () => ({ status: 200, delayMs: 150 });
    server = await serverEnv(dialect, {
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_TIMEOUT_SECONDS: '2',
      WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1,1,1,1',
    });
  });
  afterAll(async () => {
    await receiver?.close();
    await server?.dispose();
  });

  it('delivers every event at least once, after kill -9 and SIGTERM mid-backlog', async () => {
    const { orgId, key } = await orgWithKey(server.env);
    const endpoint = await cli<{ id: string; secret: string }>(server.env, [
      'webhooks',
      'create',
      '--org',
      orgId,
      '--url',
      receiver.url,
      '--events',
      'contact.created',
    ]);
    receiver.secrets = [endpoint.secret];

    let proc = await startServerProcess(server);
    const contactIds: string[] = [];
    const create = async (i: number) => {
      const res = await fetch(`${server.url}/api/v1/contacts`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ first_name: `Hook ${i}`, email: `hook-${i}@restart.example` }),
      });
      expect(res.status).toBe(201);
      contactIds.push(((await res.json()) as { id: string }).id);
    };
    for (let i = 0; i < CONTACTS; i += 20) await Promise.all(Array.from({ length: 20 }, (_, j) => create(i + j)));

    const delivered = () => new Set(receiver.received.map((r) => (r.event.data as { object: { id: string } }).object.id));
    for (const signal of ['SIGKILL', 'SIGTERM'] as const) {
      const before = delivered().size;
      await receiver.until(() => delivered().size >= before + 30, 20_000, 'deliveries before the stop');
      proc.child.kill(signal);
      await proc.exited;
      expect(delivered().size, `the backlog was drained before ${signal}`).toBeLessThan(CONTACTS);
      proc = await startServerProcess(server);
    }
    try {
      // The deliveries the killed process had claimed wait for their lease (6 s) to expire.
      await receiver.until(() => delivered().size === CONTACTS, 60_000, 'every event');
      expect([...delivered()].sort()).toEqual([...contactIds].sort());
      expect(receiver.received.every((r) => r.verifiedWith === endpoint.secret)).toBe(true);
      expect(receiver.received.every((r) => r.event.type === 'contact.created')).toBe(true);
    } finally {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
  }, 180_000);
});
