import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KyselyPlugin } from 'kysely';
import { buildApp } from '../src/app.js';
import { canonicalJson, fingerprint } from '../src/http/idempotency.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';
import { checkContract } from './helpers/contract.js';

const fingerprintOf = (body: unknown) => fingerprint('POST', '/api/v1/contacts', {}, body);

describe('fingerprint', () => {
  // Fingerprints are stored with each key for 24 hours: a rewrite must give the same text and hash
  // (these were written by the version before issue 46's one-pass canonicalJson and crypto.hash).
  it('is the same as before for key order, nesting, unicode, undefined and non-objects', () => {
    const cases: [unknown, string, string][] = [
      [
        {
          first_name: 'Ada',
          email: 'ada@example.com',
          metadata: { z: '1', a: 'x', '10': 'n', '9': 'm' },
          label_ids: ['b', 'a'],
          phone: undefined,
        },
        '{"email":"ada@example.com","first_name":"Ada","label_ids":["b","a"],"metadata":{"10":"n","9":"m","a":"x","z":"1"}}',
        'eab1fffc844e2b5fb675d652f66deeb08e078213e4a2b0a452c4c33a9ccefc89',
      ],
      [
        { contacts: [{ b: 1, a: [null, true, 1.5, 'é\u2028"'] }, {}], mode: 'upsert', Ä: 2, a: { '': 0 } },
        '{"a":{"":0},"contacts":[{"a":[null,true,1.5,"é\u2028\\""],"b":1},{}],"mode":"upsert","Ä":2}',
        '6332e1727a85575d531533b1208657fa089441839f3afb93c7861cd0d3892614',
      ],
      [null, 'null', '00ef092869a165e314133fbb7b6c4484f48195f6fcba7b6c01f298ce7bd1719b'],
      [[], '[]', '24651977b7838e174cb39b80b5f4f3f7d7c53566893d16bab3465e1943151304'],
      ['text', '"text"', '7a7ec00cc57c62d574ce8f792c0bfe3554ba3167e659a3ded30e291ba2f308c7'],
      [0, '0', 'b9d120205f03c8dd5a888878260035624db86de634155f4fd9fac83b61d7c7d7'],
    ];
    for (const [body, text, hash] of cases) {
      expect(canonicalJson(body)).toBe(text);
      expect(fingerprint('POST', '/api/v1/contacts/batch', { id: 'con_1' }, body)).toBe(hash);
    }
  });

  it('writes what sorting each object by its keys writes, for random nested bodies (keys of every kind, inherited names, __proto__)', () => {
    // The reference: each object's own keys sorted by UTF-16 code units, values by JSON.stringify.
    const reference = (value: unknown): string => {
      if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
      if (Array.isArray(value)) return `[${value.map((item) => (item === undefined ? 'null' : reference(item))).join(',')}]`;
      const entries = Object.keys(value)
        .sort()
        .filter((key) => (value as Record<string, unknown>)[key] !== undefined);
      return `{${entries.map((key) => `${JSON.stringify(key)}:${reference((value as Record<string, unknown>)[key])}`).join(',')}}`;
    };
    const names = [
      'a',
      'b',
      'B',
      'é',
      '',
      '0',
      '9',
      '10',
      '-1',
      '1.5',
      'constructor',
      'toString',
      'valueOf',
      'hasOwnProperty',
      '😀',
      'a"b',
      '\n',
      'z',
    ];
    let seed = 46;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const valueOf = (depth: number): unknown => {
      const kind = random(depth > 3 ? 5 : 8);
      if (kind === 0) return null;
      if (kind === 1) return random(2) === 0;
      if (kind === 2) return random(1000) / 8 - 50;
      if (kind === 3 || kind === 4) return names[random(names.length)]! + String.fromCharCode(random(0x3000));
      if (kind === 5) return Array.from({ length: random(4) }, () => valueOf(depth + 1));
      const object: Record<string, unknown> = {};
      for (let i = random(6); i > 0; i--) object[names[random(names.length)]!] = random(10) === 0 ? undefined : valueOf(depth + 1);
      return object;
    };
    for (let i = 0; i < 3000; i++) {
      const value = valueOf(0);
      expect(canonicalJson(value)).toBe(reference(value));
      // As a body arrives: parsed from its text (an own `__proto__` key included).
      const parsed: unknown = JSON.parse(JSON.stringify({ __proto__x: value, [`k${i}`]: value }).replace('__proto__x', '__proto__'));
      expect(canonicalJson(parsed)).toBe(reference(parsed));
    }
  });

  it('quotes every string, key or value, as JSON.stringify does', () => {
    // canonicalJson quotes short strings itself when nothing in them needs an escape: every UTF-16
    // code unit alone, beside text and in a key, surrogate pairs and halves, and the length
    // where JSON.stringify takes over.
    const strings: string[] = ['', 'a'.repeat(64), `${'a'.repeat(63)}"`, 'a'.repeat(65), `${'a'.repeat(64)}\n`, '😀', '\ud83d', '\ude00x'];
    for (let code = 0; code <= 0xffff; code++) strings.push(String.fromCharCode(code), `ab${String.fromCharCode(code)}cd`);
    for (const text of strings) {
      expect(canonicalJson(text)).toBe(JSON.stringify(text));
      expect(canonicalJson({ [text]: text })).toBe(`{${JSON.stringify(text)}:${JSON.stringify(text)}}`);
    }
  });
});

describe.each(DIALECTS)('idempotency on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write']);
  });
  afterAll(() => h.close());

  const post = (body: unknown, idem?: string, k = key, url = '/api/v1/contacts') =>
    h.call(k, 'POST', url, body, idem === undefined ? {} : { 'idempotency-key': idem });
  const count = async (email: string) =>
    (await h.call(key, 'GET', `/api/v1/contacts?email=${encodeURIComponent(email)}`)).json().data.length;

  it('replays the first response for the same key and body, creating nothing twice', async () => {
    const body = { first_name: 'I', email: 'replay@example.com', notes: 'x' };
    const first = await post(body, 'key-replay');
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await post({ notes: 'x', email: 'replay@example.com', first_name: 'I' }, 'key-replay');
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    expect(again.headers.location).toBe(first.headers.location);
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    // Rate-limit headers are fresh, not replayed.
    expect(again.headers['x-ratelimit-remaining']).not.toBe(first.headers['x-ratelimit-remaining']);
    expect(await count('replay@example.com')).toBe(1);
    // Quoted and bare forms are the same key.
    const quoted = await post(body, '"key-replay"');
    expect(quoted.headers['idempotent-replayed']).toBe('true');
  });

  it('answers 422 for the same key with another body or path', async () => {
    await post({ first_name: 'J', email: 'j@example.com' }, 'key-422');
    const other = await post({ first_name: 'J', email: 'j2@example.com' }, 'key-422');
    expect(other.statusCode).toBe(422);
    expect(other.json()).toMatchObject({ code: 'idempotency_key_reused', status: 422 });
    const otherPath = await post({ name: 'J' }, 'key-422', key, '/api/v1/contacts/labels');
    expect(otherPath.statusCode).toBe(422);
    expect(await count('j2@example.com')).toBe(0);
  });

  it('refuses malformed keys', async () => {
    for (const bad of ['', 'x'.repeat(256), 'tab\there', '""']) {
      const res = await post({ first_name: 'K', email: 'k@example.com' }, bad);
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().code).toBe('invalid_idempotency_key');
    }
    expect((await post({ first_name: 'K', email: 'k255@example.com' }, 'x'.repeat(255))).statusCode).toBe(201);
    expect(await count('k@example.com')).toBe(0);
  });

  it('does not keep validation failures: the key can then be used with a valid body', async () => {
    const invalid = await post({ first_name: 'L' }, 'key-validation');
    expect(invalid.statusCode).toBe(400);
    const valid = await post({ first_name: 'L', email: 'l@example.com' }, 'key-validation');
    expect(valid.statusCode).toBe(201);
    expect(valid.headers['idempotent-replayed']).toBeUndefined();
  });

  it('keeps domain refusals: a replayed contact_exists stays a 409', async () => {
    const first = (await post({ first_name: 'M', email: 'm@example.com' })).json<{ id: string }>();
    const conflict = await post({ first_name: 'M', email: 'm@example.com' }, 'key-conflict');
    expect(conflict.statusCode).toBe(409);
    // Named with its holder on both databases (SQLite looks it up only once the insert is refused).
    expect(conflict.json()).toMatchObject({ code: 'contact_exists', existing_id: first.id });
    expect(await count('m@example.com')).toBe(1);
    const replay = await post({ first_name: 'M', email: 'm@example.com' }, 'key-conflict');
    expect(replay.statusCode).toBe(409);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    // The same problem, naming the request that got it (its Request-Id), not the first one.
    expect({ ...replay.json(), request_id: 'x' }).toEqual({ ...conflict.json(), request_id: 'x' });
    expect(replay.json().request_id).toBe(replay.headers['request-id']);
    expect(replay.json().request_id).not.toBe(conflict.json().request_id);
  });

  it('keeps a refusal that undid part of its write: an atomic batch stopped at its second item', async () => {
    // On SQLite the claim and the work share one transaction, the work under a savepoint: the
    // first item's row must be undone while the claim, and so the refusal, are kept.
    await post({ first_name: 'P', email: 'held@example.com' });
    const body = {
      mode: 'create',
      atomic: true,
      contacts: [
        { first_name: 'Q', email: 'undone@example.com' },
        { first_name: 'P', email: 'held@example.com' },
      ],
    };
    const refused = await post(body, 'key-atomic', key, '/api/v1/contacts/batch');
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ code: 'contact_exists', index: 1 });
    expect(await count('undone@example.com')).toBe(0);
    const replay = await post(body, 'key-atomic', key, '/api/v1/contacts/batch');
    expect(replay.statusCode).toBe(409);
    expect(replay.headers['idempotent-replayed']).toBe('true');
    expect(await count('undone@example.com')).toBe(0);
    const events = await h.db.kysely
      .selectFrom('events')
      .select('id')
      .where('org_id', '=', org.orgId)
      .where('data', 'like', '%undone@example.com%')
      .execute();
    expect(events).toHaveLength(0);
  });

  it('answers 409 while the first request with the key is in flight', async () => {
    const body = { first_name: 'N', email: 'n@example.com' };
    const now = Date.now();
    await h.db.kysely
      .insertInto('idempotency_keys')
      .values({
        org_id: org.orgId,
        key: 'key-in-flight',
        fingerprint: fingerprintOf(body),
        state: 'in_progress',
        locked_until: new Date(now + 60_000).toISOString(),
        response_status: null,
        response_headers: null,
        response_body: null,
        created_at: new Date(now).toISOString(),
        expires_at: new Date(now + 86_400_000).toISOString(),
      })
      .execute();
    const res = await post(body, 'key-in-flight');
    expect(res.statusCode).toBe(409);
    expect(res.json()).toMatchObject({ code: 'idempotency_conflict', status: 409 });
    expect(res.headers['ratelimit']).toBeDefined();
    expect(await count('n@example.com')).toBe(0);
  });

  it('two really concurrent requests with one key create exactly one record', async () => {
    // Every query of this second app instance takes a few milliseconds longer, so the first
    // request is still in flight when the others arrive (SQLite would otherwise finish it first).
    const slow: KyselyPlugin = {
      transformQuery: (args) => args.node,
      transformResult: async (args) => {
        await new Promise((r) => setTimeout(r, 5));
        return args.result;
      },
    };
    const app = checkContract(
      await buildApp({
        config: h.config,
        db: { ...h.db, kysely: h.db.kysely.withPlugin(slow) },
        rateLimiter: h.rateLimiter,
        logger: false,
      }),
    );
    try {
      const body = { first_name: 'R', email: 'race@example.com' };
      const responses = await Promise.all(
        Array.from({ length: 12 }, () =>
          app.inject({
            method: 'POST',
            url: '/api/v1/contacts',
            headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': 'key-race' },
            payload: JSON.stringify(body),
          }),
        ),
      );
      for (const r of responses) {
        if (r.statusCode === 409) expect(r.json().code).toBe('idempotency_conflict');
        else expect(r.statusCode).toBe(201);
      }
      const originals = responses.filter((r) => r.statusCode === 201 && r.headers['idempotent-replayed'] === undefined);
      expect(originals.length).toBe(1);
      // On PostgreSQL the others' claims meet the first's in progress (409). On SQLite each query
      // waits its turn on the one connection, and whether another's read of the key comes before
      // the first's transaction (409) or after it (a replay) is the turn's order: since the
      // transactions run on it directly (src/db/sqliteTransactions.ts) the first's transaction
      // comes first. Either answer is right; two records never are.
      if (dialect === 'postgres') expect(responses.filter((r) => r.statusCode === 409).length).toBeGreaterThan(0);
      else expect(responses.filter((r) => r.headers['idempotent-replayed'] === 'true' || r.statusCode === 409)).toHaveLength(11);
      expect(await count('race@example.com')).toBe(1);
      // Once the first has finished, the key replays.
      const after = await post(body, 'key-race');
      expect(after.headers['idempotent-replayed']).toBe('true');
      expect(after.json().id).toBe(originals[0]!.json().id);
    } finally {
      await app.close();
    }
  });

  it('a crashed request does not lock its key forever', async () => {
    const body = { first_name: 'C', email: 'crash@example.com' };
    // Simulate the first request's server dying mid-request: a claim whose lock has lapsed.
    const fingerprint = fingerprintOf(body);
    const past = Date.now() - 120_000;
    await h.db.kysely
      .insertInto('idempotency_keys')
      .values({
        org_id: org.orgId,
        key: 'key-crash',
        fingerprint,
        state: 'in_progress',
        locked_until: new Date(past + 60_000).toISOString(),
        response_status: null,
        response_headers: null,
        response_body: null,
        created_at: new Date(past).toISOString(),
        expires_at: new Date(past + 86_400_000).toISOString(),
      })
      .execute();
    const res = await post(body, 'key-crash');
    expect(res.statusCode).toBe(201);
    const replay = await post(body, 'key-crash');
    expect(replay.headers['idempotent-replayed']).toBe('true');
  });

  it('forgets a key after 24 hours', async () => {
    const body = { first_name: 'O', email: 'old@example.com' };
    const first = await post(body, 'key-old');
    await h.db.kysely
      .updateTable('idempotency_keys')
      .set({ expires_at: new Date(Date.now() - 1).toISOString() })
      .where('org_id', '=', org.orgId)
      .where('key', '=', 'key-old')
      .execute();
    await h.call(key, 'DELETE', `/api/v1/contacts/${first.json().id}`);
    const again = await post(body, 'key-old');
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(again.json().id).not.toBe(first.json().id);
  });

  it('is scoped to the organisation: a rotated key replays, another org does not', async () => {
    const body = { first_name: 'S', email: 'scope@example.com' };
    const first = await post(body, 'key-scope');
    const rotated = await org.key(['contacts:write']);
    const viaRotated = await post(body, 'key-scope', rotated);
    expect(viaRotated.headers['idempotent-replayed']).toBe('true');
    expect(viaRotated.json().id).toBe(first.json().id);
    const other = await h.newOrg();
    const otherKey = await other.key(['contacts:write']);
    const elsewhere = await post(body, 'key-scope', otherKey);
    expect(elsewhere.statusCode).toBe(201);
    expect(elsewhere.headers['idempotent-replayed']).toBeUndefined();
    expect(elsewhere.json().id).not.toBe(first.json().id);
  });
});
