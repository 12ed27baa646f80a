import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../src/domain/ids.js';
import { checkedFetch } from './helpers/contract.js';
import { DIALECTS } from './helpers/harness.js';
import { orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';

/**
 * `kill -9` of a real server process while atomic batches of 100 contacts are being written, then
 * a restart on the same database: every batch is there whole (100 contacts, each with its events
 * and metadata rows, found through the metadata filter) or not at all, and every batch answered
 * 200 before the kill is there whole.
 */
const ROUNDS = 3;
const WORKERS = 4;

describe.each(DIALECTS)('kill -9 during atomic batches on %s', (dialect) => {
  let server: ServerEnv;
  let apiKey: string;
  beforeAll(async () => {
    server = await serverEnv(dialect);
    apiKey = (await orgWithKey(server.env)).key;
  });
  afterAll(() => server?.dispose());

  const headers = () => ({ authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' });

  it(`leaves each atomic batch all there or not at all, over ${ROUNDS} rounds`, async () => {
    const sent: { id: string; acked: boolean }[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const proc = await startServerProcess(server);
      let killed = false;
      const worker = async (w: number) => {
        for (let i = 0; !killed; i++) {
          const batch = { id: `r${round}w${w}i${i}${randomBase62(6)}`, acked: false };
          sent.push(batch);
          const contacts = Array.from({ length: 100 }, (_, n) => ({
            first_name: `Crash ${n}`,
            email: `${batch.id.toLowerCase()}-${n}@batch.example`,
            external_id: `${batch.id}-${n}`,
            metadata: { batch: batch.id, n: String(n) },
          }));
          try {
            const res = await checkedFetch(`${server.url}/api/v1/contacts/batch`, {
              method: 'POST',
              headers: headers(),
              body: JSON.stringify({ mode: 'create', atomic: true, contacts }),
            });
            const body = (await res.json()) as { data?: { status: number }[] };
            if (res.status !== 200) expect.fail(`batch ${batch.id} answered ${res.status} before the kill: ${JSON.stringify(body)}`);
            expect(body.data!.every((item) => item.status === 201)).toBe(true);
            batch.acked = true;
          } catch (error) {
            if (!killed) throw error;
          }
        }
      };
      const load = Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
      await new Promise((resolve) => setTimeout(resolve, 500 + round * 300));
      killed = true;
      proc.child.kill('SIGKILL');
      expect((await proc.exited).signal).toBe('SIGKILL');
      await load;
    }
    expect(sent.filter((b) => b.acked).length).toBeGreaterThan(3);

    const proc = await startServerProcess(server);
    try {
      let whole = 0;
      for (const batch of sent) {
        const res = await checkedFetch(`${server.url}/api/v1/contacts?metadata%5Bbatch%5D=${batch.id}&limit=100`, { headers: headers() });
        const page = (await res.json()) as { data: { external_id: string }[]; has_more: boolean };
        expect([0, 100], `batch ${batch.id} (acked: ${batch.acked})`).toContain(page.data.length);
        expect(page.has_more).toBe(false);
        if (batch.acked) expect(page.data.length, batch.id).toBe(100);
        if (page.data.length === 100) whole++;
      }
      expect(whole).toBeGreaterThanOrEqual(sent.filter((b) => b.acked).length);
      // Every contact written has its creation event: as many contact.created events as contacts.
      let events = 0;
      let cursor: string | null = null;
      do {
        const res: Response = await checkedFetch(
          `${server.url}/api/v1/events?type=contact.created&limit=100${cursor ? `&cursor=${cursor}` : ''}`,
          { headers: headers() },
        );
        const page = (await res.json()) as { data: unknown[]; next_cursor: string | null };
        events += page.data.length;
        cursor = page.next_cursor;
      } while (cursor);
      expect(events).toBe(whole * 100);
    } finally {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
  }, 240_000);
});
