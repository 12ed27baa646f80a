import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Ctx } from '../src/domain/context.js';
import { decodeCsv, importContacts, MAX_IMPORT_ROWS } from '../src/domain/contacts/import.js';
import { createContact } from '../src/domain/contacts/contacts.js';
import { ValidationError } from '../src/domain/errors.js';
import { createLabel } from '../src/domain/labels/labels.js';
import { signedIn } from './helpers/browserSession.js';
import { DIALECTS, makeHarness, type Harness, type Org } from './helpers/harness.js';

/** The message a file-level problem shows next to the file field. */
async function fileError(promise: Promise<unknown>): Promise<string> {
  const error = await promise.then(
    () => null,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ValidationError);
  const errors = (error as ValidationError).errors;
  expect(errors.map((e) => e.field)).toEqual(['file']);
  return errors[0]!.message;
}

function decodeError(bytes: Uint8Array): string {
  try {
    decodeCsv(bytes);
  } catch (error) {
    expect(error).toBeInstanceOf(ValidationError);
    return (error as ValidationError).errors[0]!.message;
  }
  throw new Error('decodeCsv accepted the bytes');
}

describe.each(DIALECTS)('CSV import on %s', (dialect) => {
  let h: Harness;
  beforeAll(async () => {
    h = await makeHarness(dialect);
  });
  afterAll(() => h.close());

  async function setup(): Promise<{ org: Org; ctx: Ctx; count: () => Promise<number> }> {
    const org = await h.newOrg();
    const ctx = org.adminCtx();
    const count = async () =>
      Number(
        (
          await h.db.kysely
            .selectFrom('contacts')
            .select((eb) => eb.fn.countAll<string | number>().as('n'))
            .where('org_id', '=', org.orgId)
            .executeTakeFirstOrThrow()
        ).n,
      );
    return { org, ctx, count };
  }

  it('is all or nothing by default: one refused row and nothing is written, every row reported', async () => {
    const { ctx, count } = await setup();
    const csv =
      'first_name,last_name,email\nAda,Lovelace,ada@example.com\n,Nameless,nameless@example.com\nGrace,Hopper,not-an-email\nAlan,Turing,alan@example.com\n';
    const result = await importContacts(ctx, csv, { partial: false });
    expect(result.written).toBe(false);
    expect(result.counts).toEqual({ rows: 4, created: 0, would_be_created: 2, refused: 2 });
    expect(result.rows.map((r) => [r.row, r.status, r.email])).toEqual([
      [2, 'would_be_created', 'ada@example.com'],
      [3, 'refused', 'nameless@example.com'],
      [4, 'refused', 'not-an-email'],
      [5, 'would_be_created', 'alan@example.com'],
    ]);
    expect(result.rows[1]!.reasons).toEqual(['first_name: must not be empty']);
    expect(result.rows[2]!.reasons).toEqual(['email: must be a valid email address such as ada@example.com']);
    expect(result.rows.every((r) => r.id === undefined)).toBe(true);
    expect(await count()).toBe(0);

    const clean = await importContacts(ctx, 'first_name,email\nAda,ada@example.com\nAlan,alan@example.com\n', { partial: false });
    expect(clean.written).toBe(true);
    expect(clean.counts).toEqual({ rows: 2, created: 2, would_be_created: 0, refused: 0 });
    expect(clean.rows.every((r) => r.status === 'created' && /^con_/.test(r.id ?? ''))).toBe(true);
    expect(await count()).toBe(2);
  });

  it('imports the valid rows and reports the refused ones when partial', async () => {
    const { ctx, count } = await setup();
    const result = await importContacts(ctx, 'first_name,email,phone\nAda,ada@example.com,+44 1\nBad,bad@,\nAlan,alan@example.com,\n', {
      partial: true,
    });
    expect(result.written).toBe(true);
    expect(result.counts).toEqual({ rows: 3, created: 2, would_be_created: 0, refused: 1 });
    expect(result.rows.map((r) => r.status)).toEqual(['created', 'refused', 'created']);
    expect(result.rows[1]!.id).toBeUndefined();
    expect(await count()).toBe(2);
    const ada = await h.db.kysely.selectFrom('contacts').selectAll().where('id', '=', result.rows[0]!.id!).executeTakeFirstOrThrow();
    expect(ada).toMatchObject({
      first_name: 'Ada',
      last_name: '',
      email: 'ada@example.com',
      phone: '+44 1',
      address: null,
      source_type: 'csv_import',
    });

    const none = await importContacts(ctx, 'first_name,email\nX,nope\n', { partial: true });
    expect(none.written).toBe(false);
    expect(none.counts).toMatchObject({ created: 0, refused: 1 });
  });

  it('refuses duplicate emails within the file and against existing contacts, case-insensitively', async () => {
    const { ctx, count } = await setup();
    await createContact(ctx, { first_name: 'Existing', email: 'Taken@Example.com' }, 'manual');
    const csv =
      'first_name,email\nOne,one@example.com\nTwo,ONE@example.com\nThree,taken@example.COM\nFour,four@example.com\nFive,one@example.com\n';
    const result = await importContacts(ctx, csv, { partial: true });
    expect(result.rows.map((r) => r.status)).toEqual(['created', 'refused', 'refused', 'created', 'refused']);
    expect(result.rows[1]!.reasons).toEqual(['email: the same email as row 2 of this file']);
    expect(result.rows[2]!.reasons).toEqual(['email: a contact with this email already exists in this organisation']);
    expect(result.rows[4]!.reasons).toEqual(['email: the same email as row 2 of this file']);
    expect(await count()).toBe(3);

    // A second import of the same file creates nothing more: every email is now taken.
    const again = await importContacts(ctx, csv, { partial: true });
    expect(again.counts.created).toBe(0);
    expect(await count()).toBe(3);

    // Another organisation's contacts do not count as duplicates.
    const other = await setup();
    expect((await importContacts(other.ctx, 'first_name,email\nT,taken@example.com\n', { partial: false })).counts.created).toBe(1);
  });

  it('says clearly what is wrong with a file it cannot import, writing nothing', async () => {
    const { ctx, count } = await setup();
    expect(await fileError(importContacts(ctx, '', { partial: true }))).toContain('The file is empty');
    expect(await fileError(importContacts(ctx, '\n\n', { partial: true }))).toContain('The file is empty');
    expect(await fileError(importContacts(ctx, 'first_name,email\n', { partial: true }))).toBe(
      'The file has a header row but no contacts under it.',
    );
    expect(await fileError(importContacts(ctx, 'first_name,last_name\nAda,Lovelace\n', { partial: true }))).toBe(
      'The header row has no email column; every file needs first_name and email.',
    );
    expect(await fileError(importContacts(ctx, 'email\nada@example.com\n', { partial: true }))).toContain('no first_name column');
    expect(await fileError(importContacts(ctx, 'first_name,email,company\nAda,ada@example.com,ACME\n', { partial: true }))).toBe(
      'The header row has an unknown column: "company". Accepted columns: first_name, last_name, email, phone, address, notes, labels.',
    );
    expect(await fileError(importContacts(ctx, 'first_name,email,Email\nAda,a@example.com,b@example.com\n', { partial: true }))).toBe(
      'The column email appears twice in the header row.',
    );
    expect(await fileError(importContacts(ctx, 'first_name,email\n"Ada,ada@example.com\n', { partial: true }))).toContain(
      'could not be read as CSV',
    );
    const tooMany = 'first_name,email\n' + Array.from({ length: MAX_IMPORT_ROWS + 1 }, (_, i) => `P${i},p${i}@example.com`).join('\n');
    expect(await fileError(importContacts(ctx, tooMany, { partial: true }))).toBe(
      'The file has more than 5,000 rows; at most 5,000 can be imported at once. Split it.',
    );
    // Millions of blank or ragged lines are not parsed to the end: refused like any long file.
    expect(await fileError(importContacts(ctx, 'first_name,email\n' + '\n'.repeat(2_000_000), { partial: true }))).toBe(
      'The file has a header row but no contacts under it.',
    );
    expect(await fileError(importContacts(ctx, 'first_name,email\n' + 'x\n'.repeat(1_000_000), { partial: true }))).toContain(
      'more than 5,000 rows',
    );
    expect(await count()).toBe(0);

    expect(decodeError(new Uint8Array())).toContain('The file is empty');
    expect(decodeError(new Uint8Array([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00]))).toContain('spreadsheet workbook, not a CSV file');
    expect(decodeError(new Uint8Array([0x66, 0xe9, 0x0a]))).toContain('not UTF-8 text'); // Latin-1 "fé"
    expect(decodeError(Buffer.from('first_name\0,email'))).toContain('binary data');
  });

  it('attaches existing labels by name and refuses unknown names without creating them', async () => {
    const { ctx, count } = await setup();
    const volunteer = await createLabel(ctx, { name: 'Volunteer' });
    const donor = await createLabel(ctx, { name: 'Major Donor' });
    const csv = [
      'first_name,email,labels',
      'Ada,ada@example.com,volunteer; MAJOR DONOR ;',
      'Alan,alan@example.com,',
      'Grace,grace@example.com,Volunteer;Board;Press',
      'Edsger,edsger@example.com,Volunteer;volunteer',
    ].join('\n');
    const result = await importContacts(ctx, csv, { partial: true });
    expect(result.rows.map((r) => r.status)).toEqual(['created', 'created', 'refused', 'created']);
    expect(result.rows[2]!.reasons).toEqual([
      'labels: no label named "Board" in this organisation (an import does not create labels: create it on the Labels page first)',
      'labels: no label named "Press" in this organisation (an import does not create labels: create it on the Labels page first)',
    ]);
    const links = await h.db.kysely
      .selectFrom('contact_labels')
      .select(['contact_id', 'label_id'])
      .where('org_id', '=', ctx.orgId)
      .execute();
    const of = (id: string) =>
      links
        .filter((l) => l.contact_id === id)
        .map((l) => l.label_id)
        .sort();
    expect(of(result.rows[0]!.id!)).toEqual([volunteer.id, donor.id].sort());
    expect(of(result.rows[1]!.id!)).toEqual([]);
    expect(of(result.rows[3]!.id!)).toEqual([volunteer.id]);
    const labels = await h.db.kysely.selectFrom('labels').select('name').where('org_id', '=', ctx.orgId).execute();
    expect(labels).toHaveLength(2);
    expect(await count()).toBe(3);
  });

  it('keeps unicode, quoted commas and line breaks, and reads spreadsheet variants of CSV', async () => {
    const { ctx } = await setup();
    const csv =
      'First Name;Last Name;E-mail;Address;Notes\r\n' +
      'Zoë;Ångström-Łukasiewicz;zoë@bücher.example;"Straße 1\r\n10115 Berlin";"says ""hi""; 👋"\r\n' +
      '\r\n' +
      '李;小龍;li@example.cn;;\r\n';
    const decoded = decodeCsv(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(csv)]));
    const result = await importContacts(ctx, decoded, { partial: false });
    expect(result.counts.created).toBe(2);
    // The blank line keeps its number, so row numbers match the spreadsheet.
    expect(result.rows.map((r) => [r.row, r.name])).toEqual([
      [2, 'Zoë Ångström-Łukasiewicz'],
      [4, '李 小龍'],
    ]);
    const zoe = await h.db.kysely.selectFrom('contacts').selectAll().where('id', '=', result.rows[0]!.id!).executeTakeFirstOrThrow();
    expect(zoe).toMatchObject({ email: 'zoë@bücher.example', address: 'Straße 1\r\n10115 Berlin', notes: 'says "hi"; 👋' });

    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('first_name\temail\nÉmile\temile@example.com\n', 'utf16le')]);
    expect((await importContacts(ctx, decodeCsv(utf16), { partial: false })).rows[0]).toMatchObject({ status: 'created', name: 'Émile' });
  });

  it('checks each row with the same rules as a contact made by hand', async () => {
    const { ctx } = await setup();
    const csv = [
      'first_name,email,phone,notes',
      `${'x'.repeat(201)},long@example.com,,`,
      'Bidi\u202Eevil,bidi@example.com,,',
      'Ok,ok@example.com,,"multi\nline notes"',
      'Short,short@example.com,1,2,3',
    ].join('\n');
    const result = await importContacts(ctx, csv, { partial: true });
    expect(result.rows.map((r) => [r.row, r.status])).toEqual([
      [2, 'refused'],
      [3, 'refused'],
      [4, 'created'],
      [5, 'refused'], // a quoted line break stays inside its row, as in a spreadsheet
    ]);
    expect(result.rows[0]!.reasons).toEqual(['first_name: must be at most 200 characters']);
    expect(result.rows[1]!.reasons).toEqual(['first_name: must be text without control characters']);
    expect(result.rows[3]!.reasons).toEqual(['row: has 5 fields but the header has 4']);
  });

  it('refuses an import by an API key without contacts:write', async () => {
    const { ctx } = await setup();
    const reader: Ctx = { ...ctx, actor: { kind: 'api_key', keyId: 'key_x', scopes: new Set(['contacts:read']) } };
    await expect(importContacts(reader, 'first_name,email\nA,a@example.com\n', { partial: true })).rejects.toThrow('contacts:write');
  });

  it('shows imported contacts through the API with source_type csv_import', async () => {
    const { org, ctx } = await setup();
    await createLabel(ctx, { name: 'Press' });
    await importContacts(ctx, 'first_name,last_name,email,labels\nAda,Lovelace,ada@example.com,Press\nAlan,Turing,alan@example.com,\n', {
      partial: false,
    });
    const key = await org.key(['contacts:read']);
    const res = await h.call(key, 'GET', '/api/v1/contacts');
    expect(res.statusCode).toBe(200);
    const data = res.json().data as { email: string; source_type: string; labels: { name: string }[] }[];
    expect(data.map((c) => [c.email, c.source_type, c.labels.map((l) => l.name)])).toEqual([
      ['ada@example.com', 'csv_import', ['Press']],
      ['alan@example.com', 'csv_import', []],
    ]);
  });

  describe('the dashboard form', () => {
    function multipart(parts: { name: string; value?: string; filename?: string; content?: string }[]) {
      const boundary = '----orgdata-test-boundary';
      const body = parts
        .map((p) =>
          p.filename !== undefined
            ? `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"; filename="${p.filename}"\r\nContent-Type: text/csv\r\n\r\n${p.content ?? ''}\r\n`
            : `--${boundary}\r\nContent-Disposition: form-data; name="${p.name}"\r\n\r\n${p.value}\r\n`,
        )
        .join('');
      return { payload: `${body}--${boundary}--\r\n`, contentType: `multipart/form-data; boundary=${boundary}` };
    }

    it('checks the CSRF token, then imports and shows every row', async () => {
      const { org, count } = await setup();
      const user = await signedIn(h, org.adminEmail);
      const form = await user.get('/import');
      expect(form.statusCode).toBe(200);
      expect(form.body).toContain('<label for="f-file">CSV file</label>');
      expect(form.body.indexOf('name="_csrf"')).toBeLessThan(form.body.indexOf('type="file"'));
      const post = (parts: Parameters<typeof multipart>[0]) => {
        const { payload, contentType } = multipart(parts);
        return h.app.inject({ method: 'POST', url: '/import', headers: { cookie: user.cookie, 'content-type': contentType }, payload });
      };
      const csv = 'first_name,email\nAda,ada@example.com\nBad,bad\n';
      const forged = await post([
        { name: '_csrf', value: 'forged-token-forged-token-forged' },
        { name: 'file', filename: 'c.csv', content: csv },
      ]);
      expect(forged.statusCode).toBe(403);
      expect((await post([{ name: 'file', filename: 'c.csv', content: csv }])).statusCode).toBe(403);
      expect(await count()).toBe(0);

      const refused = await post([
        { name: '_csrf', value: user.csrf },
        { name: 'file', filename: 'c.csv', content: csv },
      ]);
      expect(refused.statusCode).toBe(400);
      expect(refused.body).toContain('Nothing was imported');
      expect(refused.body).toContain('Valid, not imported');
      expect(await count()).toBe(0);

      const partial = await post([
        { name: '_csrf', value: user.csrf },
        { name: 'file', filename: 'c.csv', content: csv },
        { name: 'partial', value: 'yes' },
      ]);
      expect(partial.statusCode).toBe(200);
      expect(partial.body).toContain('Imported 1 contact.');
      expect(partial.body).toContain('email: must be a valid email address');
      expect(await count()).toBe(1);

      const badHeader = await post([
        { name: '_csrf', value: user.csrf },
        { name: 'file', filename: 'c.csv', content: 'name,mail\nx,y\n' },
      ]);
      expect(badHeader.statusCode).toBe(400);
      expect(badHeader.body).toMatch(/<p class="error" id="f-file-error">The header row has unknown columns/);
    });

    it('refuses a file over the size limit with a message next to the field', async () => {
      const { org } = await setup();
      const user = await signedIn(h, org.adminEmail);
      const { payload, contentType } = multipart([
        { name: '_csrf', value: user.csrf },
        { name: 'file', filename: 'big.csv', content: 'first_name,email\n' + 'x'.repeat(5 * 1024 * 1024) },
      ]);
      const res = await h.app.inject({
        method: 'POST',
        url: '/import',
        headers: { cookie: user.cookie, 'content-type': contentType },
        payload,
      });
      expect(res.statusCode).toBe(413);
      expect(res.body).toContain('id="f-file-error">The file is larger than 5 MB');
    });
  });
});
