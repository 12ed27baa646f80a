import { createServer, type Server, type Socket } from 'node:net';
import { inspect } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { Orgdata, OrgdataError, type ContactCreateParams, type OrgdataErrorCode } from '../src/index.js';
import { failure } from './helpers/failure.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

/** Every way an error can end up in a log. */
const renderings = (error: unknown) => [
  String(error),
  (error as Error).message,
  (error as Error).stack ?? '',
  JSON.stringify(error),
  inspect(error, { depth: Infinity, showHidden: true }),
];

describe('errors (real server)', () => {
  let server: OrgdataServer;
  let orgdata: Orgdata;

  beforeAll(async () => {
    server = await startServer();
    orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });
  }, 60_000);
  afterAll(() => server?.stop());

  it('carries every field of the problem document', async () => {
    const error = await failure(orgdata.contacts.get('con_nope'));
    expect(error).toMatchObject({
      name: 'OrgdataError',
      status: 404,
      code: 'not_found',
      title: 'Not Found',
      type: `${server.origin}/docs/api/errors#not_found`,
    });
    expect(error.detail).toContain('con_nope');
    expect(error.requestId).toMatch(/^req_/);
    expect(error.message).toContain('404 not_found');
    expect(error.message).toContain(error.requestId);
    expect(JSON.parse(JSON.stringify(error))).toMatchObject({ code: 'not_found', status: 404, requestId: error.requestId });
  });

  it('a 400 carries the refused fields; a 409 the existing record; a members 404 the missing ids', async () => {
    const invalid = await failure(orgdata.contacts.create({ first_name: 'No email' } as ContactCreateParams));
    expect(invalid).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(invalid.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field: expect.stringContaining('email') })]));

    const first = await orgdata.contacts.create({ first_name: 'Ada', email: 'ada@example.com' });
    const duplicate = await failure(orgdata.contacts.create({ first_name: 'Ada', email: 'ADA@example.com' }));
    expect(duplicate).toMatchObject({ status: 409, code: 'contact_exists', existingId: first.id });

    const group = await orgdata.groups.create({ name: 'Team' });
    const missing = await failure(orgdata.groups.members.add(group.id, [first.id, 'con_missing1']));
    expect(missing).toMatchObject({ status: 404, code: 'not_found', missingIds: ['con_missing1'] });
  });

  it('`code` is a union: comparing it narrows, and a typo does not compile', async () => {
    const error = await failure(orgdata.contacts.create({ first_name: 'Ada', email: 'ada@example.com' }));
    expectTypeOf(error.code).toEqualTypeOf<OrgdataErrorCode>();
    if (error.code === 'contact_exists') {
      expectTypeOf(error.code).toEqualTypeOf<'contact_exists'>();
      expect(error.existingId).toMatch(/^con_/);
    } else expect.fail(`got ${error.code}`);
    const code: OrgdataErrorCode = (error as OrgdataError).code;
    // @ts-expect-error: not a code the API sends, so the comparison does not compile
    expect(code === 'contact_exist').toBe(false);
  });

  describe('the API key never leaks', () => {
    const key = () => server.apiKey;
    // The secret part of the key, even with a typo at its end (a refused key must not leak either).
    const leaks = (error: unknown) => renderings(error).filter((text) => text.includes(key().slice('od_live_'.length, -2)));

    it('not from an API error, a refused key, a network failure or a timeout', async () => {
      // A peer that accepts and never answers, so the timeout is the only way the call can end
      // (against the real server a 1 ms timeout lost the race now and then on a loaded machine).
      const sockets: Socket[] = [];
      const silent: Server = createServer((socket) => void sockets.push(socket));
      await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
      const silentUrl = `http://127.0.0.1:${(silent.address() as { port: number }).port}/api/v1`;
      const errors: unknown[] = [
        await failure(orgdata.contacts.get('con_nope')),
        await failure(orgdata.contacts.create({ first_name: 'x' } as ContactCreateParams)),
        await failure(new Orgdata({ apiKey: `${key().slice(0, -2)}xx`, baseUrl: server.baseUrl }).contacts.list()),
        await failure(new Orgdata({ apiKey: key(), baseUrl: 'http://127.0.0.1:9/api/v1', maxRetries: 0 }).contacts.list()),
        await failure(new Orgdata({ apiKey: key(), baseUrl: silentUrl, timeout: 200, maxRetries: 0 }).contacts.list()),
      ];
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
      expect(errors.map((e) => (e as OrgdataError).code)).toEqual([
        'not_found',
        'invalid_request',
        'unauthorized',
        'connection_error',
        'timeout',
      ]);
      for (const error of errors) expect(leaks(error)).toEqual([]);
    });

    it('not from the client object itself', () => {
      const client = new Orgdata({ apiKey: key(), baseUrl: server.baseUrl });
      expect(inspect(client, { depth: Infinity, showHidden: true })).not.toContain(key());
      expect(JSON.stringify(client)).not.toContain(key());
    });

    it('not into a URL: it is sent only in the Authorization header', async () => {
      const urls: string[] = [];
      const headers: string[] = [];
      const client = new Orgdata({
        apiKey: key(),
        baseUrl: server.baseUrl,
        fetch: (input, init) => {
          urls.push(String(input));
          headers.push(new Headers(init?.headers).get('authorization') ?? '');
          return fetch(input, init);
        },
      });
      await client.contacts.list({ email: 'a@example.com' });
      await client.events.list({ type: 'contact.*' });
      expect(urls.some((url) => url.includes(key()))).toBe(false);
      expect(headers).toEqual([`Bearer ${key()}`, `Bearer ${key()}`]);
      expect(() => new Orgdata({ apiKey: key(), baseUrl: `${server.baseUrl}?key=${key()}` })).toThrow(/baseUrl/);
      try {
        new Orgdata({ apiKey: key(), baseUrl: `${server.baseUrl}?key=${key()}` });
      } catch (error) {
        expect(leaks(error)).toEqual([]);
      }
    });
  });
});

describe('construction', () => {
  const globals = globalThis as { window?: unknown };
  afterEach(() => {
    delete globals.window;
  });
  const options = { apiKey: 'od_live_0000000000000000000000000000000000000000000', baseUrl: 'http://127.0.0.1:1/api/v1' };

  it('refuses to run in a browser unless dangerouslyAllowBrowser', () => {
    globals.window = {};
    expect(() => new Orgdata(options)).toThrow(/browser/);
    expect(() => new Orgdata({ ...options, dangerouslyAllowBrowser: true })).not.toThrow();
  });

  it('takes a base URL only if it is http(s) and ends in /api/v1, from the option or ORGDATA_BASE_URL', () => {
    const rule = (got: string) => `should end in /api/v1, such as https://orgdata.example.com/api/v1: got ${got}`;
    const refused = (baseUrl: string) => {
      try {
        new Orgdata({ ...options, baseUrl });
        return null;
      } catch (e) {
        return (e as Error).message;
      }
    };
    expect(refused('https://orgdata.example.com')).toBe(`Orgdata: baseUrl ${rule('https://orgdata.example.com')}`);
    expect(refused('https://orgdata.example.com/')).toBe(`Orgdata: baseUrl ${rule('https://orgdata.example.com')}`);
    expect(refused('https://orgdata.example.com/api')).toBe(`Orgdata: baseUrl ${rule('https://orgdata.example.com/api')}`);
    expect(refused('https://orgdata.example.com/api/v2')).toMatch(/should end in \/api\/v1/);
    expect(refused('https://orgdata.example.com/api/v1/contacts')).toMatch(/should end in \/api\/v1/);
    expect(refused('ftp://orgdata.example.com/api/v1')).toBe(
      'Orgdata: baseUrl should be an http(s) URL, such as https://orgdata.example.com/api/v1: got ftp://orgdata.example.com/api/v1',
    );
    expect(refused('orgdata.example.com/api/v1')).toMatch(/not a URL; it should look like https:\/\/orgdata\.example\.com\/api\/v1/);
    // Credentials are refused without repeating them.
    const withKey = refused(`https://user:${options.apiKey}@orgdata.example.com`);
    expect(withKey).toMatch(/must not carry credentials/);
    expect(withKey).not.toContain(options.apiKey);
    expect(refused('https://orgdata.example.com/api/v1#x')).toMatch(/fragment/);
    expect(refused('https://orgdata.example.com/api/v1?')).toMatch(/a query/);
    // A short test key that happens to be part of the host name is not mistaken for a key in the URL.
    expect(() => new Orgdata({ apiKey: 'test', baseUrl: 'https://test.example/api/v1' })).not.toThrow();

    // A trailing slash, and a path in front (behind a reverse proxy), are fine.
    for (const fine of [
      'https://orgdata.example.com/api/v1',
      'https://orgdata.example.com/api/v1/',
      'http://10.0.0.1:3000/orgdata/api/v1',
    ]) {
      expect(refused(fine), fine).toBeNull();
    }

    const saved = process.env.ORGDATA_BASE_URL;
    process.env.ORGDATA_BASE_URL = 'http://127.0.0.1:3000';
    try {
      expect(() => new Orgdata({ apiKey: options.apiKey })).toThrow(`Orgdata: ORGDATA_BASE_URL ${rule('http://127.0.0.1:3000')}`);
    } finally {
      if (saved === undefined) delete process.env.ORGDATA_BASE_URL;
      else process.env.ORGDATA_BASE_URL = saved;
    }
  });

  it('needs a key and a base URL, and checks its numbers', () => {
    const saved = { key: process.env.ORGDATA_API_KEY, url: process.env.ORGDATA_BASE_URL };
    delete process.env.ORGDATA_API_KEY;
    delete process.env.ORGDATA_BASE_URL;
    try {
      expect(() => new Orgdata({ baseUrl: options.baseUrl })).toThrow(/apiKey/);
      expect(() => new Orgdata({ apiKey: options.apiKey })).toThrow(/baseUrl/);
      expect(() => new Orgdata({ ...options, baseUrl: 'not a url' })).toThrow(/baseUrl/);
      expect(() => new Orgdata({ ...options, maxRetries: -1 })).toThrow(/maxRetries/);
      expect(() => new Orgdata({ ...options, timeout: 0 })).toThrow(/timeout/);
      process.env.ORGDATA_API_KEY = options.apiKey;
      process.env.ORGDATA_BASE_URL = options.baseUrl;
      expect(() => new Orgdata()).not.toThrow();
    } finally {
      if (saved.key === undefined) delete process.env.ORGDATA_API_KEY;
      else process.env.ORGDATA_API_KEY = saved.key;
      if (saved.url === undefined) delete process.env.ORGDATA_BASE_URL;
      else process.env.ORGDATA_BASE_URL = saved.url;
    }
  });
});
