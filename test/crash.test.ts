import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBase62 } from '../src/domain/ids.js';
import { checkedFetch } from './helpers/contract.js';
import { DIALECTS } from './helpers/harness.js';
import { orgWithKey, serverEnv, startServerProcess, type ServerEnv } from './helpers/serverProcess.js';

/**
 * `kill -9` of a real server process under concurrent keyed POSTs, then a restart on the same
 * database and a retry of every key: exactly one record per key, every acknowledged write still
 * there, and the retry of an acknowledged write replays it (same id) instead of refusing it.
 */
const ROUNDS = 3;
const WORKERS = 12;
const LOCK_SECONDS = 1;

type Kind = 'contacts' | 'contacts/labels' | 'groups';
interface Sent {
  kind: Kind;
  key: string;
  body: Record<string, string>;
  /** The id of the record, when the server answered 201 before it died. */
  ackedId?: string;
}

const bodyFor = (kind: Kind, key: string): Record<string, string> =>
  kind === 'contacts' ? { first_name: 'Crash', email: `${key.toLowerCase()}@crash.example` } : { name: key };

describe.each(DIALECTS)('kill -9 under keyed POSTs on %s', (dialect) => {
  let server: ServerEnv;
  let apiKey: string;
  beforeAll(async () => {
    server = await serverEnv(dialect, { IDEMPOTENCY_LOCK_SECONDS: String(LOCK_SECONDS) });
    apiKey = (await orgWithKey(server.env)).key;
  });
  afterAll(() => server?.dispose());

  const post = (sent: Sent) =>
    checkedFetch(`${server.url}/api/v1/${sent.kind}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', 'idempotency-key': sent.key },
      body: JSON.stringify(sent.body),
    });

  async function listAll(kind: Kind): Promise<{ id: string; name?: string; email?: string }[]> {
    const all: { id: string; name?: string; email?: string }[] = [];
    let cursor: string | null = null;
    do {
      const res: Response = await checkedFetch(`${server.url}/api/v1/${kind}?limit=100${cursor ? `&cursor=${cursor}` : ''}`, {
        headers: { authorization: `Bearer ${apiKey}` },
      });
      const page = (await res.json()) as { data: { id: string }[]; next_cursor: string | null };
      all.push(...page.data);
      cursor = page.next_cursor;
    } while (cursor);
    return all;
  }

  it(`finds one record per key and no acknowledged write lost, over ${ROUNDS} rounds`, async () => {
    const sent: Sent[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const proc = await startServerProcess(server);
      let killed = false;
      const worker = async (w: number) => {
        const kinds: Kind[] = ['contacts', 'groups', 'contacts/labels'];
        for (let i = 0; !killed; i++) {
          const kind = kinds[(w + i) % kinds.length]!;
          const key = `r${round}-w${w}-${i}-${randomBase62(6)}`;
          const item: Sent = { kind, key, body: bodyFor(kind, key) };
          sent.push(item);
          try {
            const res = await post(item);
            const body = (await res.json()) as { id?: string };
            if (res.status === 201) item.ackedId = body.id;
            else expect.fail(`${kind} ${key} answered ${res.status} before the kill: ${JSON.stringify(body)}`);
          } catch (error) {
            if (!killed) throw error;
          }
        }
      };
      const load = Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
      // Let the load run until this round has had writes acknowledged (however slow the machine
      // is), then a little longer, different each round, and kill the process without warning.
      const acked = () => sent.filter((s) => s.ackedId).length;
      const target = acked() + 20;
      while (acked() < target) await new Promise((resolve) => setTimeout(resolve, 20));
      await new Promise((resolve) => setTimeout(resolve, 50 + round * 120));
      killed = true;
      proc.child.kill('SIGKILL');
      expect((await proc.exited).signal).toBe('SIGKILL');
      await load;
    }
    expect(sent.filter((s) => s.ackedId).length).toBeGreaterThan(50);

    // Restart on the same database and retry every key until its claim has lapsed.
    const proc = await startServerProcess(server);
    try {
      let replays = 0;
      for (const item of sent) {
        let res = await post(item);
        for (let tries = 0; res.status === 409 && tries < 50; tries++) {
          const problem = (await res.json()) as { code: string };
          expect(problem.code, `${item.key}`).toBe('idempotency_conflict');
          await new Promise((resolve) => setTimeout(resolve, 100));
          res = await post(item);
        }
        const body = (await res.json()) as { id: string };
        expect(res.status, `${item.kind} ${item.key}: ${JSON.stringify(body)}`).toBe(201);
        if (item.ackedId) {
          // Acknowledged before the kill: the retry is a replay of that very record.
          expect(body.id, item.key).toBe(item.ackedId);
          expect(res.headers.get('idempotent-replayed'), item.key).toBe('true');
          replays++;
        }
      }
      expect(replays).toBe(sent.filter((s) => s.ackedId).length);

      for (const kind of ['contacts', 'groups', 'contacts/labels'] as Kind[]) {
        const records = await listAll(kind);
        const count = new Map<string, number>();
        for (const record of records) {
          const name = kind === 'contacts' ? record.email! : record.name!;
          count.set(name, (count.get(name) ?? 0) + 1);
        }
        for (const item of sent.filter((s) => s.kind === kind)) {
          const name = kind === 'contacts' ? item.body.email! : item.body.name!;
          expect(count.get(name), `${kind} for key ${item.key}`).toBe(1);
          if (item.ackedId) expect(records.some((r) => r.id === item.ackedId)).toBe(true);
        }
        expect(records.length).toBe(sent.filter((s) => s.kind === kind).length);
      }
    } finally {
      proc.child.kill('SIGKILL');
      await proc.exited;
    }
  }, 180_000);
});
