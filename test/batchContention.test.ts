import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from 'kysely';
import { insertContacts } from '../src/domain/contacts/contacts.js';
import { errorHandler } from '../src/http/errorHandler.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

/**
 * Issue 28, item 1: overlapping batches at once. Six batches a round, sent together, about an
 * overlapping set of contacts (some existing, most new), upserting on external_id and on email,
 * atomic and not, with and without an Idempotency-Key, each list in its own order, plus a create
 * batch. On PostgreSQL they lock and insert the same rows in different orders (a deadlock, a
 * unique violation lost to the other batch); each must still end as a documented answer, never a
 * 5xx, and each contact exist once.
 */
const ROUNDS = 6;
const EXISTING = 8;
const NEW = 24;

interface Item {
  index: number;
  status: number;
  contact?: { id: string; email: string; external_id: string | null };
  error?: { code: string };
}

/** A deterministic shuffle (the same orders every run, different in each batch). */
function shuffled<T>(list: T[], seed: number): T[] {
  const out = [...list];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe.each(DIALECTS)('overlapping batches at once on %s', (dialect) => {
  let h: Harness;
  let key: string;
  let orgId: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    const org = await h.newOrg();
    orgId = org.orgId;
    key = await org.key(['contacts:read', 'contacts:write']);
  });
  afterAll(() => h.close());

  it(`answers every item with a documented status and makes each contact once, over ${ROUNDS} rounds`, async () => {
    const failures: string[] = [];
    const busy: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // Contact n is the same person in every batch: the same external id and email (upper-cased
      // in some batches: one contact, whatever the case).
      const person = (n: number, batch: number) => ({
        first_name: `R${round} P${n} B${batch}`,
        email: batch % 2 === 0 ? `r${round}-p${n}@race.example` : `R${round}-P${n}@race.example`,
        external_id: `race-${round}-${n}`,
        metadata: { batch: String(batch) },
      });
      const existing = await h.call(key, 'POST', '/api/v1/contacts/batch', {
        mode: 'create',
        contacts: Array.from({ length: EXISTING }, (_, n) => person(n, 0)),
      });
      expect(existing.statusCode, existing.body).toBe(200);
      const everyone = Array.from({ length: EXISTING + NEW }, (_, n) => n);
      const plans = [
        { mode: 'upsert', match_on: 'external_id', atomic: false, people: everyone },
        { mode: 'upsert', match_on: 'external_id', atomic: false, people: [...everyone].reverse() },
        { mode: 'upsert', match_on: 'email', atomic: true, people: shuffled(everyone, round * 7 + 1).slice(0, 28) },
        { mode: 'upsert', match_on: 'external_id', atomic: true, people: shuffled(everyone, round * 7 + 2).slice(4) },
        { mode: 'upsert', match_on: 'email', atomic: false, people: shuffled(everyone, round * 7 + 3) },
        { mode: 'create', match_on: 'external_id', atomic: false, people: shuffled(everyone, round * 7 + 4).slice(0, 20) },
      ];
      const answers = await Promise.all(
        plans.map((plan, b) =>
          h.call(
            key,
            'POST',
            '/api/v1/contacts/batch',
            { mode: plan.mode, match_on: plan.match_on, atomic: plan.atomic, contacts: plan.people.map((n) => person(n, b + 1)) },
            b % 2 === 0 ? { 'idempotency-key': `race-${round}-${b}-${Date.now()}` } : {},
          ),
        ),
      );
      answers.forEach((res, b) => {
        const plan = plans[b]!;
        const where = `round ${round} batch ${b} (${plan.mode} on ${plan.match_on}${plan.atomic ? ', atomic' : ''})`;
        if (res.statusCode === 503 && res.headers['retry-after'] && res.json().code === 'service_unavailable') {
          // The documented last resort (contention outlasting the retries, or a lock wait past the
          // statement timeout on a crowded machine): allowed, but rare (counted below).
          busy.push(`${where}: 503 ${res.body.slice(0, 200)}`);
          return;
        }
        if (res.statusCode !== 200) {
          // An upsert of consistent people never conflicts: an atomic one too answers 200.
          failures.push(`${where}: ${res.statusCode} ${res.body.slice(0, 200)}`);
          return;
        }
        const data = res.json().data as Item[];
        data.forEach((item, i) => {
          const allowed = plan.mode === 'upsert' ? [200, 201] : [201, 409];
          if (!allowed.includes(item.status)) failures.push(`${where} item ${i}: ${item.status} ${JSON.stringify(item.error)}`);
          if (plan.mode === 'create' && item.status === 409 && !['contact_exists', 'external_id_exists'].includes(item.error!.code)) {
            failures.push(`${where} item ${i}: 409 ${item.error!.code}`);
          }
          if (item.contact && item.contact.external_id !== `race-${round}-${plan.people[i]}`) {
            failures.push(`${where} item ${i}: answered with contact ${item.contact.external_id}`);
          }
        });
      });
      // Exactly one contact per person, holding that person's email and external id.
      const rows = await h.db.kysely
        .selectFrom('contacts')
        .select(['external_id', 'email_lower'])
        .where('org_id', '=', orgId)
        .where('external_id', 'like', `race-${round}-%`)
        .execute();
      expect(rows.length, `round ${round}: contacts`).toBe(EXISTING + NEW);
      for (const row of rows) expect(row.email_lower).toBe(`r${round}-p${row.external_id!.split('-')[2]}@race.example`);
      const byEmail = await sql<{
        n: number;
      }>`select count(*) as n from contacts where org_id = ${orgId} and email_lower like ${`r${round}-p%`}`.execute(h.db.kysely);
      expect(Number(byEmail.rows[0]!.n), `round ${round}: contacts by email`).toBe(EXISTING + NEW);
    }
    expect(failures, failures.join('\n')).toEqual([]);
    // Never a 500; a 503 with Retry-After at most, rarely: at most one batch in eighteen.
    expect(busy.length, busy.join('\n')).toBeLessThanOrEqual(2);
  });
});

describe.skipIf(!process.env.TEST_DATABASE_URL)('a batch PostgreSQL rolls back to break a deadlock', () => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness('postgres');
    org = await h.newOrg();
    key = await org.key(['contacts:read', 'contacts:write']);
  });
  afterAll(() => h.close());

  // The test's own transaction locks the contact the batch updates, then inserts the contact the
  // batch is creating: each waits for the other. Its deadlock_timeout is longer than the server's
  // (1 s), so the batch's check runs first and PostgreSQL rolls the batch back (40P01).
  it.each([
    ['without', false],
    ['with', true],
  ])('is run again and answers 200, %s an Idempotency-Key', async (_, keyed) => {
    const tag = keyed ? 'keyed' : 'plain';
    const existing = (
      await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Existing', email: `e-${tag}@deadlock.example` })
    ).json() as { id: string; email: string };
    const fresh = `n-${tag}@deadlock.example`;
    const body = {
      mode: 'upsert',
      match_on: 'email',
      contacts: [
        { first_name: 'New', email: fresh },
        { first_name: 'Changed', email: existing.email },
      ],
    };
    const headers: Record<string, string> = keyed ? { 'idempotency-key': `deadlock-${Date.now()}` } : {};
    const send = () => h.call(key, 'POST', '/api/v1/contacts/batch', body, headers);
    const { batch } = await h.db.kysely.transaction().execute(async (trx) => {
      await sql`set local deadlock_timeout = '10s'`.execute(trx);
      const { pid } = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!;
      await sql`select id from contacts where id = ${existing.id} for update`.execute(trx);
      const batch = send();
      // Once the batch (its new contact inserted) waits for the lock held here…
      for (let waited = 0; ; waited += 20) {
        const blocked = await sql<{
          n: number;
        }>`select count(*)::int as n from pg_stat_activity where ${pid} = any(pg_blocking_pids(pid))`.execute(h.db.kysely);
        if (blocked.rows[0]!.n > 0) break;
        if (waited > 10_000) throw new Error('the batch never waited for the lock');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // …insert the contact it is creating: this waits for the batch, until PostgreSQL rolls it back.
      await insertContacts(trx, { ...org.adminCtx(), db: trx }, [{ first_name: 'Raw', email: fresh }], 'api');
      return { batch };
    });
    const res = await batch;
    expect(res.statusCode, res.body).toBe(200);
    // Run again after this transaction committed: the contact it made is the new one's match.
    const data = res.json().data as Item[];
    expect(data.map((item) => item.status)).toEqual([200, 200]);
    const made = await h.db.kysely.selectFrom('contacts').select(['id', 'first_name']).where('email_lower', '=', fresh).execute();
    expect(made).toEqual([{ id: data[0]!.contact!.id, first_name: 'New' }]);
    if (keyed) {
      // The response stored with the key is the committed run's.
      const replay = await send();
      expect(replay.headers['idempotent-replayed']).toBe('true');
      expect(replay.json().data).toEqual(res.json().data);
    }
  });
});

describe('a deadlock or serialization failure left to the edge', () => {
  it.each(['40P01', '40001'])('answers %s with a 503 problem document and Retry-After', async (code) => {
    const app = Fastify();
    app.setErrorHandler(errorHandler('http://orgdata.test/docs/api/errors'));
    app.get('/', () => Promise.reject(Object.assign(new Error('deadlock detected'), { code })));
    const res = await app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json()).toMatchObject({ status: 503, code: 'service_unavailable' });
    await app.close();
  });
});
