import { readdirSync, realpathSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
// The package as an application installs it: resolved through the workspace link to client/dist.
import { Orgdata, OrgdataError, type Contact } from '@orgdata/client';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import * as source from '../src/index.js';
import { startServer, type OrgdataServer } from './helpers/server.js';

const CLIENT = path.resolve(import.meta.dirname, '..');

describe('@orgdata/client as built (black box, against `npm start`: node dist/cli.js serve)', () => {
  let server: OrgdataServer;
  let receiver: http.Server;
  const deliveries: { body: string; headers: http.IncomingHttpHeaders }[] = [];

  beforeAll(async () => {
    receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        deliveries.push({ body: Buffer.concat(chunks).toString('utf8'), headers: req.headers });
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    server = await startServer({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }, 'built');
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await new Promise((resolve) => receiver.close(resolve));
  });

  it('is built from the current sources (`npm install` builds it; after a change: npm run -w client build)', () => {
    const sources = readdirSync(path.join(CLIENT, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
    const built = Math.min(...['dist/esm/index.js', 'dist/cjs/index.js'].map((f) => statSync(path.join(CLIENT, f)).mtimeMs));
    const newer = sources.filter((f) => statSync(path.join(CLIENT, 'src', f)).mtimeMs > built);
    expect(newer, 'client/dist is older than these sources: run npm run -w client build').toEqual([]);
  });

  it('resolves to the workspace package’s dist, not its sources', () => {
    expect(realpathSync(path.resolve(CLIENT, '../node_modules/@orgdata/client'))).toBe(CLIENT);
    expect(Orgdata).not.toBe(source.Orgdata);
    expect(Orgdata.name).toBe('Orgdata');
  });

  it('creates, lists, iterates, and verifies a real webhook delivery', async () => {
    const { port } = receiver.address() as AddressInfo;
    const endpoint = await server.cli<{ secret: string }>([
      'webhooks',
      'create',
      '--org',
      server.orgId,
      '--url',
      `http://127.0.0.1:${port}/`,
    ]);
    const orgdata = new Orgdata({ apiKey: server.apiKey, baseUrl: server.baseUrl });

    const made: Contact[] = [];
    for (let i = 0; i < 5; i++) made.push(await orgdata.contacts.create({ first_name: `Box ${i}`, email: `box${i}@example.com` }));
    const page = await orgdata.contacts.list({ limit: 2 });
    expect(page).toMatchObject({ object: 'list', has_more: true });
    expect(page.data.map((c) => c.id)).toEqual(made.slice(0, 2).map((c) => c.id));
    const seen: string[] = [];
    for await (const contact of orgdata.contacts.list({ limit: 2 })) seen.push(contact.id);
    expect(seen).toEqual(made.map((c) => c.id));

    const error = await orgdata.contacts.create({ first_name: 'Again', email: 'box0@example.com' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OrgdataError);
    expect(error).toMatchObject({ status: 409, code: 'contact_exists', existingId: made[0]!.id });

    await vi.waitFor(() => expect(deliveries.length).toBeGreaterThanOrEqual(5), { timeout: 20_000, interval: 100 });
    const events = deliveries.map((d) => Orgdata.webhooks.verify(d.body, d.headers, endpoint.secret));
    expect(events.map((e) => e.type).sort()).toEqual(Array(5).fill('contact.created'));
    expect(() =>
      Orgdata.webhooks.verify(deliveries[0]!.body, deliveries[0]!.headers, `whsec_${Buffer.alloc(24, 1).toString('base64')}`),
    ).toThrow();
  }, 40_000);
});
