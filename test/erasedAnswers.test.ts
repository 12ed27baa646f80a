import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eraseContact } from '../src/domain/contacts/erase.js';
import { erasedAnswer } from '../src/http/erasedAnswer.js';
import type { DeliveryWorker } from '../src/infra/webhooks/deliveryWorker.js';
import { cliResult, everyFile } from './helpers/exchange.js';
import { DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { cli, orgWithKey, serverEnv, startServerProcess } from './helpers/serverProcess.js';
import { startReceiver, type Receiver } from './helpers/webhookReceiver.js';
import { endpointFor, workerFor } from './helpers/webhooks.js';

// Issue 28, item 2: what an erasure missed, the stored answers that named the person without
// returning it (a 409 contact_exists, a batch item), and an export made afterwards.
describe.each(DIALECTS)('stored answers naming an erased contact, through the CLI, on %s', { timeout: 180_000 }, (dialect) => {
  it('are 410 contact_erased on replay, naming nobody, and no export holds the e-mail', async () => {
    const env = await serverEnv(dialect);
    const exported = mkdtempSync(path.join(tmpdir(), 'orgdata-erased-export-'));
    try {
      const { orgId, key } = await orgWithKey(env.env);
      const server = await startServerProcess(env);
      const post = async (url: string, body: unknown, idempotencyKey: string) => {
        const res = await fetch(`${env.url}/api/v1${url}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'idempotency-key': idempotencyKey },
          body: JSON.stringify(body),
        });
        return {
          status: res.status,
          text: await res.text(),
          requestId: res.headers.get('request-id'),
          replayed: res.headers.get('idempotent-replayed'),
        };
      };
      const dana = { first_name: 'Dana', last_name: 'Quillfeather', email: 'dana.quill@example.com', phone: '+44 7700 900456' };
      const other = { first_name: 'Olive', last_name: 'Stays', email: 'olive.stays@example.com' };
      const requests = {
        // K3: a 201 holding the created contact.
        created: ['/contacts', dana, 'k3-create'],
        // K: the e-mail taken, in another case: a 409 naming it and the holder.
        conflict: ['/contacts', { first_name: 'Someone', email: 'Dana.Quill@example.com' }, 'k-conflict'],
        // K2: a batch whose second item names it (a 409 item), beside another person's.
        batch: ['/contacts/batch', { mode: 'create', contacts: [other, { first_name: 'Dan', email: dana.email }] }, 'k2-batch'],
      } as const;
      let id = '';
      let erased: Record<string, unknown>;
      let docsUrl = '';
      try {
        const created = await post(...requests.created);
        expect(created.status).toBe(201);
        id = (JSON.parse(created.text) as { id: string }).id;
        const conflict = await post(...requests.conflict);
        expect(conflict.status).toBe(409);
        expect(JSON.parse(conflict.text)).toMatchObject({ code: 'contact_exists', existing_id: id });
        expect(conflict.text).toContain('Dana.Quill@example.com');
        docsUrl = (JSON.parse(conflict.text) as { type: string }).type.split('/api/errors#')[0]!;
        const batch = await post(...requests.batch);
        expect(batch.status).toBe(200);
        expect(batch.text).toContain(id);
        expect(batch.text).toContain(dana.email);
        // Before the erasure, each key replays its answer.
        expect((await post(...requests.conflict)).text).toContain('Dana.Quill@example.com');

        erased = await cli(env.env, ['contacts', 'erase', '--org', orgId, '--id', id]);

        const expected = (requestId: string | null) => ({ ...(JSON.parse(erasedAnswer(docsUrl).body) as object), request_id: requestId });
        for (const [name, [url, body, idempotencyKey]] of Object.entries(requests)) {
          const again = await post(url, body, idempotencyKey);
          expect([name, again.status, again.replayed]).toEqual([name, 410, 'true']);
          expect(JSON.parse(again.text), name).toEqual(expected(again.requestId));
          for (const trace of [id, 'dana', 'Quillfeather', '900456'])
            expect(again.text.toLowerCase(), `${name}: ${trace}`).not.toContain(trace.toLowerCase());
        }
        // The key's body is gone with the answer: another body with it is answered the same, and not run.
        const otherBody = await post('/contacts', { first_name: 'Dana', email: 'dana.quill@example.com' }, 'k3-create');
        expect([otherBody.status, JSON.parse(otherBody.text)]).toEqual([410, expected(otherBody.requestId)]);
        const found = await fetch(`${env.url}/api/v1/contacts?email=${encodeURIComponent(dana.email)}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        expect(((await found.json()) as { data: unknown[] }).data).toEqual([]);
        // Olive's contact, made by the batch, stands.
        const olive = await fetch(`${env.url}/api/v1/contacts?email=${encodeURIComponent(other.email)}`, {
          headers: { authorization: `Bearer ${key}` },
        });
        expect(((await olive.json()) as { data: unknown[] }).data).toHaveLength(1);
      } finally {
        server.child.kill('SIGTERM');
        await server.exited;
      }
      expect(erased).toEqual({
        contact_id: id,
        deleted: true,
        events_erased: 2, // created, deleted
        replays_erased: 3,
        webhook_answers_erased: 0,
        search_index_merged: dialect === 'sqlite',
      });

      const result = await cliResult(env.env, ['export', '--to', exported]);
      expect(result.code, JSON.stringify(result.json)).toBe(0);
      const files = everyFile(exported);
      expect(files.map((f) => f.name)).toContain(path.join('tables', 'idempotency_keys.jsonl'));
      for (const file of files) {
        for (const trace of ['dana.quill@example.com', 'Quillfeather', '900456']) {
          expect(file.text.toLowerCase(), `${file.name}: ${trace}`).not.toContain(trace.toLowerCase());
        }
      }
    } finally {
      rmSync(exported, { recursive: true, force: true });
      await env.dispose();
    }
  });
});

describe.each(DIALECTS)('answers naming an erased contact, in the database, on %s', (dialect) => {
  let h: Harness;
  let receiver: Receiver;
  let worker: DeliveryWorker | null = null;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await worker?.stop();
    await receiver.close();
    await h.close();
  });

  it('an answer naming only its e-mail, in another case, is erased; a longer address or another organisation is not', async () => {
    const org = await h.newOrg();
    const stranger = await h.newOrg();
    const key = await org.key(['contacts:write']);
    const id = (await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Mail', email: 'mail.only@example.com' })).json().id as string;
    const at = new Date();
    const row = (orgId: string, idempotencyKey: string, text: string) => ({
      org_id: orgId,
      key: idempotencyKey,
      fingerprint: 'f'.repeat(64),
      state: 'done',
      locked_until: at.toISOString(),
      response_status: 409,
      response_headers: '{}',
      response_body: JSON.stringify({ code: 'contact_exists', detail: text, existing_id: null }),
      created_at: at.toISOString(),
      expires_at: new Date(at.getTime() + 3_600_000).toISOString(),
    });
    await h.db.kysely
      .insertInto('idempotency_keys')
      .values([
        // A conflict met in a race names no holder: only the e-mail, as the request spelt it.
        row(org.orgId, 'only-mail', 'A contact with the email MAIL.Only@Example.com already exists.'),
        row(org.orgId, 'longer', 'A contact with the email xmail.only@example.com.au already exists.'),
        row(stranger.orgId, 'elsewhere', 'A contact with the email mail.only@example.com already exists.'),
      ])
      .execute();
    const result = await eraseContact(
      { db: h.db.kysely, orgId: org.orgId, actor: { kind: 'system' }, requestId: 'test', now: new Date() },
      id,
      erasedAnswer(h.config.docsUrl),
    );
    expect(result.replays_erased).toBe(1);
    const rows = await h.db.kysely
      .selectFrom('idempotency_keys')
      .select(['key', 'fingerprint', 'response_status'])
      .orderBy('key')
      .execute();
    const byKey = Object.fromEntries(rows.map((r) => [r.key, [r.fingerprint, r.response_status]]));
    expect(byKey).toMatchObject({
      'only-mail': ['erased', 410],
      longer: ['f'.repeat(64), 409],
      elsewhere: ['f'.repeat(64), 409],
    });
  });

  it('loses its excerpt; other answers keep theirs', async () => {
    const org = await h.newOrg();
    const key = await org.key(['contacts:write']);
    const endpoint = await endpointFor(h.db.kysely, org.orgId, receiver.url, ['contact.created']);
    receiver.secrets = [endpoint.secret];
    // A receiver that echoes what it got: its answer, kept as the attempt's excerpt, holds the contact.
    receiver.answer = (received) => ({ status: 200, body: received.body });
    const ids: string[] = [];
    for (const email of ['echoed.erin@example.com', 'echoed.bob@example.com']) {
      ids.push((await h.call(key, 'POST', '/api/v1/contacts', { first_name: 'Echoed', email })).json().id as string);
    }
    worker = workerFor(h.db.kysely);
    worker.start();
    const excerpts = () =>
      h.db.kysely
        .selectFrom('webhook_attempts')
        .select('response_excerpt')
        .where('org_id', '=', org.orgId)
        .orderBy('attempted_at')
        .execute();
    for (let i = 0; (await excerpts()).length < 2; i++) {
      if (i > 200) throw new Error('the deliveries were not attempted');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await worker.stop();
    worker = null;
    expect((await excerpts()).map((a) => a.response_excerpt).join()).toContain('echoed.erin@example.com');

    const result = await eraseContact(
      { db: h.db.kysely, orgId: org.orgId, actor: { kind: 'system' }, requestId: 'test', now: new Date() },
      ids[0]!,
      erasedAnswer(h.config.docsUrl),
    );
    expect(result.webhook_answers_erased).toBe(1);
    const after = (await excerpts()).map((a) => a.response_excerpt);
    expect(after.filter((e) => e === null)).toHaveLength(1);
    expect(after.join()).not.toContain('echoed.erin');
    expect(after.join()).toContain('echoed.bob@example.com');
  });
});
