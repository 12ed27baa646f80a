import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importContacts } from '../src/domain/contacts/import.js';
import { isEmail, normaliseEmail } from '../src/domain/validation.js';
import { signedIn } from './helpers/browserSession.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

/** Domains IDNA refuses (bad punycode, a label over 63 octets once encoded) or our LDH rule does. */
const INVALID = [
  'a@xn--zz.com',
  'a@xn--a.com',
  'a@xn--.com',
  `a@${'ü'.repeat(60)}.com`,
  'a@-bad-.com',
  'a@exa mple.com',
  'a@ex_ample.com',
  'a@exa%mple.com',
  'a@💩.la',
  'a@example.com.',
  'a@example',
];

describe('email normalisation', () => {
  it('maps the domain with UTS #46 and keeps the local part as given', () => {
    expect(normaliseEmail('Ada@EXAMPLE.com')).toBe('Ada@example.com');
    expect(normaliseEmail('ü@xn--exmple-cua.com')).toBe('ü@exämple.com');
    expect(normaliseEmail('ü@XN--EXMPLE-CUA.COM')).toBe('ü@exämple.com');
    expect(normaliseEmail('Ü@EXÄMPLE.COM')).toBe('Ü@exämple.com');
    expect(normaliseEmail('ü@exa\u0308mple.com')).toBe('ü@exämple.com');
    expect(normaliseEmail('用户@例子。广告')).toBe('用户@例子.广告');
    expect(normaliseEmail('x@ｅｘａｍｐｌｅ．com')).toBe('x@example.com');
    expect(normaliseEmail('not-an-email')).toBe('not-an-email');
    expect(normaliseEmail('a@xn--zz.com')).toBe('a@xn--zz.com');
  });

  it('refuses domains that are not valid IDNs', () => {
    // Node 24's domainToASCII passes an undecodable xn-- label through; isEmail refuses it.
    expect(isEmail('a@xn--zz.com')).toBe(false);
    for (const email of INVALID) expect(isEmail(email), email).toBe(false);
    for (const email of ['ü@exämple.com', '用户@例子.广告', 'ü@xn--exmple-cua.com', 'x@ｅｘａｍｐｌｅ。com'])
      expect(isEmail(email), email).toBe(true);
  });
});

describe.each(DIALECTS)('internationalised contact emails on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let key: string;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    org = await h.newOrg();
    key = await org.key(['contacts:write']);
  });
  afterAll(() => h.close());

  const create = (email: string) => h.call(key, 'POST', '/api/v1/contacts', { first_name: 'I', email });
  const byEmail = async (email: string) =>
    (await h.call(key, 'GET', `/api/v1/contacts?email=${encodeURIComponent(email)}`)).json().data.map((c: { id: string }) => c.id);

  it('accepts internationalised addresses and returns them as stored', async () => {
    for (const email of ['ü@exämple.com', '用户@例子.广告']) {
      const res = await create(email);
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().email).toBe(email);
      expect((await h.call(key, 'GET', `/api/v1/contacts/${res.json().id}`)).json().email).toBe(email);
    }
  });

  it('normalises the domain, not the local part', async () => {
    const ada = await create('Ada.L@EXAMPLE.com');
    expect(ada.statusCode, ada.body).toBe(201);
    expect(ada.json().email).toBe('Ada.L@example.com');
    const fullWidth = await create('Fw@ｅｘａｍｐｌｅ．org');
    expect(fullWidth.statusCode, fullWidth.body).toBe(201);
    expect(fullWidth.json().email).toBe('Fw@example.org');
    expect((await h.call(key, 'GET', `/api/v1/contacts/${ada.json().id}`)).json().email).toBe('Ada.L@example.com');
  });

  it('treats punycode and Unicode forms of a domain as one address', async () => {
    const first = await create('p@bücher.example');
    expect(first.statusCode).toBe(201);
    for (const email of ['p@xn--bcher-kva.example', 'P@XN--BCHER-KVA.EXAMPLE', 'p@BÜCHER.example']) {
      const again = await create(email);
      expect(again.statusCode, email).toBe(409);
      expect(again.json()).toMatchObject({ code: 'contact_exists', existing_id: first.json().id });
    }
    const ü = (await create('ü@xn--exmple-cua.com')).json();
    expect(ü).toMatchObject({ code: 'contact_exists' });
    const ids = await byEmail('ü@XN--EXMPLE-CUA.COM');
    expect(ids).toHaveLength(1);
    expect(await byEmail('ü@exämple.com')).toEqual(ids);
    expect(await byEmail('p@xn--bcher-kva.example')).toEqual([first.json().id]);
    expect(await byEmail('nobody@xn--zz.com')).toEqual([]);
  });

  it('refuses invalid IDN domains with 400 and writes nothing', async () => {
    for (const email of INVALID) {
      const res = await create(email);
      expect(res.statusCode, email).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request' });
      expect(res.json().errors.map((e: { field: string }) => e.field)).toContain('email');
      expect(await byEmail(email)).toEqual([]);
    }
  });

  it('applies the same rules to PATCH', async () => {
    const owner = (await create('owner@exämple.net')).json();
    const contact = (await create('patch-me@example.com')).json();
    const patch = (email: string) => h.call(key, 'PATCH', `/api/v1/contacts/${contact.id}`, { email });
    const renamed = await patch('Patched@XN--EXMPLE-CUA.NET');
    expect(renamed.statusCode, renamed.body).toBe(200);
    expect(renamed.json().email).toBe('Patched@exämple.net');
    expect(await byEmail('patched@exämple.net')).toEqual([contact.id]);
    const clash = await patch('OWNER@xn--exmple-cua.net');
    expect(clash.statusCode).toBe(409);
    expect(clash.json()).toMatchObject({ code: 'contact_exists', existing_id: owner.id });
    const invalid = await patch('a@xn--zz.com');
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json()).toMatchObject({ code: 'invalid_request' });
    expect((await h.call(key, 'GET', `/api/v1/contacts/${contact.id}`)).json().email).toBe('Patched@exämple.net');
  });

  it('treats composed and decomposed accents (NFC, NFD) as one address everywhere an email enters', async () => {
    const nfc = 'ü-x@x.test';
    const nfd = 'u\u0308-x@x.test';
    expect(nfd).not.toBe(nfc);
    const first = await create(nfc);
    expect(first.statusCode, first.body).toBe(201);
    const again = await create(nfd);
    expect(again.statusCode, again.body).toBe(409);
    expect(again.json()).toMatchObject({ code: 'contact_exists', existing_id: first.json().id });
    // Stored and returned in NFC, whichever spelling made it.
    const decomposed = await create('zoe\u0308-y@x.test');
    expect(decomposed.statusCode, decomposed.body).toBe(201);
    expect(decomposed.json().email).toBe('zo\u00eb-y@x.test');
    for (const form of [nfc, nfd, 'U\u0308-X@X.TEST']) expect(await byEmail(form), form).toEqual([first.json().id]);
    // A cursor issued for one spelling works with the other.
    const page = (await h.call(key, 'GET', `/api/v1/contacts?limit=1&email=${encodeURIComponent(nfc)}`)).json();
    expect(page.next_cursor).toBeNull();

    // PATCH to the other spelling of a taken address is a conflict; to its own, no change.
    const clash = await h.call(key, 'PATCH', `/api/v1/contacts/${decomposed.json().id}`, { email: nfd });
    expect(clash.statusCode).toBe(409);
    expect(clash.json()).toMatchObject({ code: 'contact_exists', existing_id: first.json().id });
    const same = await h.call(key, 'PATCH', `/api/v1/contacts/${first.json().id}`, { email: nfd });
    expect(same.statusCode, same.body).toBe(200);
    expect(same.json()).toMatchObject({ email: nfc, updated_at: first.json().updated_at });

    // A batch: upsert matching on email finds it in the other spelling; create is 409; two items
    // in the two spellings are one contact.
    const batch = (body: object) => h.call(key, 'POST', '/api/v1/contacts/batch', body);
    const upsert = await batch({ mode: 'upsert', match_on: 'email', contacts: [{ first_name: 'I', email: nfd, notes: 'synced' }] });
    expect(upsert.statusCode, upsert.body).toBe(200);
    expect(upsert.json().data[0]).toMatchObject({ status: 200, contact: { id: first.json().id, email: nfc, notes: 'synced' } });
    const created = await batch({ mode: 'create', contacts: [{ first_name: 'I', email: nfd }] });
    expect(created.json().data[0]).toMatchObject({ status: 409, error: { code: 'contact_exists', existing_id: first.json().id } });
    const twice = await batch({
      mode: 'create',
      contacts: [
        { first_name: 'I', email: 'ä-z@x.test' },
        { first_name: 'I', email: 'a\u0308-z@x.test' },
      ],
    });
    expect(twice.json().data.map((d: { status: number }) => d.status)).toEqual([201, 422]);
    expect(twice.json().data[1].error).toMatchObject({ code: 'duplicate_in_batch', duplicate_of: 0 });

    // The CSV import and the dashboard's form.
    const csv = `first_name,email\nTaken,${nfd}\nNew,o\u0308-w@x.test\nTwice,\u00f6-w@x.test\n`;
    const result = await importContacts(org.adminCtx(), csv, { partial: true });
    expect(result.rows.map((r) => [r.status, r.email, r.reasons])).toEqual([
      ['refused', nfc, ['email: a contact with this email already exists in this organisation']],
      ['created', '\u00f6-w@x.test', []],
      ['refused', '\u00f6-w@x.test', ['email: the same email as row 3 of this file']],
    ]);
    const user = await signedIn(h, org.adminEmail);
    const form = await user.post('/contacts', { first_name: 'Form', email: nfd });
    expect(form.statusCode).toBe(400);
    expect(form.body).toContain('already exists');
  });

  it('normalises emails from the dashboard form and the CSV import too', async () => {
    const o = await h.newOrg();
    const oKey = await o.key(['contacts:write']);
    const user = await signedIn(h, o.adminEmail);
    expect((await user.post('/contacts', { first_name: 'Form', email: 'form@EXÄMPLE.com' })).statusCode).toBe(303);
    const list = async () =>
      (await h.call(oKey, 'GET', '/api/v1/contacts?limit=100')).json().data.map((c: { email: string }) => c.email) as string[];
    expect(await list()).toEqual(['form@exämple.com']);
    const ctx = o.adminCtx();
    const csv =
      'first_name,email\nTaken,form@xn--exmple-cua.com\nNew,New@XN--BCHER-KVA.example\nTwice,new@bücher.EXAMPLE\nBad,b@xn--zz.com\n';
    const result = await importContacts(ctx, csv, { partial: true });
    expect(result.rows.map((r) => [r.status, r.email, r.reasons])).toEqual([
      ['refused', 'form@exämple.com', ['email: a contact with this email already exists in this organisation']],
      ['created', 'New@bücher.example', []],
      ['refused', 'new@bücher.example', ['email: the same email as row 3 of this file']],
      ['refused', 'b@xn--zz.com', ['email: must be a valid email address such as ada@example.com']],
    ]);
    expect(await list()).toEqual(['form@exämple.com', 'New@bücher.example']);
  });
});
