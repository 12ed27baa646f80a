import { createHash, randomBytes } from 'node:crypto';
import http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPERATOR } from '../src/domain/events/memberEvents.js';
import { purgeDueBlobs } from '../src/domain/files/purges.js';
import { UPLOAD_CLAIM_LEASE_MS } from '../src/domain/files/storage.js';
import { findSandbox } from '../src/domain/orgs/sandbox.js';
import { resetSandbox, type SandboxReset } from '../src/domain/orgs/sandboxReset.js';
import { createEndpoint } from '../src/domain/webhooks/endpoints.js';
import { openBlobStore } from '../src/infra/choose.js';
import { STORES, storeHarness, type StoreProbe } from './helpers/blobStores.js';
import { checkResponse } from './helpers/contract.js';
import { ALL_SCOPES, DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { LocalS3 } from './helpers/localS3.js';
import { S3Gate } from './helpers/s3Gate.js';

/*
 * "Reset test data" (resetSandbox: the dashboard's Developer > Test data page and `orgdata sandbox
 * reset` both call it; called here directly, in the test process, on the server's database and
 * store) racing an upload of a sandbox file through its signed link.
 *
 * An upload (receiveUpload) finds its `pending` file, streams the body aside to the store
 * (stage), claims the file (`upload_claim`), copies the bytes to the file's key (commit), then
 * turns the file `ready` in one transaction with its `file.uploaded` event (and webhook
 * deliveries). The reset deletes the sandbox's rows in one transaction and purges the bytes of
 * the files it deleted after it commits. The orders that matter:
 *
 * 1. The reset runs, whole, while the body is still arriving (every dialect): the upload finds
 *    its file gone when it claims it. Answer: 404 not_found (the file is gone; the link finds
 *    nothing), its staged bytes discarded.
 * 2. The reset is under way (its transaction open, here held on a locked sandbox contact) while
 *    the body finishes (PostgreSQL: SQLite runs one transaction at a time, so the reset cannot be
 *    caught half-way there). The reset deletes the files before anything it may wait on: the
 *    upload finds its file gone, 404 as in 1. (Before the fix the reset read the files' keys at
 *    its start and deleted the rows later: the upload turned its file ready in between, answered
 *    200, the reset deleted the row, and its bytes stayed in the store with nothing pointing to
 *    them.) Here the upload's claim waits for the reset's transaction (its file's row, deleted in
 *    it), and finds the file gone once the reset commits.
 * 3. The upload's completing transaction is open (its file already `ready` in it, held here on
 *    the sandbox's webhook endpoint, which its delivery row references) when the reset deletes
 *    the files (PostgreSQL). The reset's delete waits for it and deletes the file as it then is:
 *    the upload answers 200 (it was done before the reset got to it), then the file is gone with
 *    its bytes and its `file.uploaded` event.
 * 4. The reset runs while the upload copies its bytes into place (its claim taken): see the last
 *    suite of this file.
 *
 * In every order: no file of the sandbox made before the reset survives it, no bytes of it are
 * left in the store (nor staging leftovers, nor rows of the purge ledger), a file made after the
 * reset is kept, and the live organisation's file is untouched. Waits are on states (bytes in the
 * store, a backend waiting on a lock), never on time.
 */

const MiB = 1024 * 1024;
/** Big enough that the S3 store has handed a 5 MiB multipart part to the bucket before the pause. */
const SIZE = 12 * MiB;
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const pathOf = (url: string) => new URL(url).pathname;
type Json = Record<string, unknown>;

async function waitFor(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  // A safety net against hanging, not a timing assertion.
  for (let i = 0; i < 1000; i++) {
    if (await condition()) return;
    await sleep(10);
  }
  throw new Error(`gave up waiting for ${what}`);
}

let s3: LocalS3;
beforeAll(async () => {
  s3 = await LocalS3.start();
});
afterAll(() => s3.close());

describe.each(DIALECTS.flatMap((dialect) => STORES.map((store) => [dialect, store] as const)))(
  'resetting the test data during an upload, on %s, %s store',
  (dialect, store) => {
    let h: Harness;
    let probe: StoreProbe;
    let base: string;
    beforeAll(async () => {
      ({ h, probe } = await storeHarness(dialect, store, s3));
      base = await h.app.listen({ port: 0, host: '127.0.0.1' });
    });
    afterAll(() => h.close());

    /** An organisation with a live and a test key, and a live file uploaded (its id and bytes). */
    async function setUp() {
      const org = await h.newOrg();
      const live = await org.key(ALL_SCOPES);
      const test = await org.key(ALL_SCOPES, { mode: 'test' });
      const sandbox = (await findSandbox(h.db.kysely, org.orgId))!;
      const liveBytes = randomBytes(1000);
      const liveFile = await reserve(live, liveBytes.length);
      expect((await send(liveFile.upload_url, liveBytes)).status).toBe(200);
      return { org, live, test, sandbox, liveFile: liveFile.id, liveBytes };
    }

    async function reserve(key: string, size: number): Promise<{ id: string; upload_url: string }> {
      const res = await h.call(key, 'POST', '/api/v1/files', { name: 'race.bin', content_type: 'application/octet-stream', size });
      expect(res.statusCode, res.body).toBe(201);
      return res.json();
    }

    /**
     * Starts a PUT of `bytes` to an upload link over a real connection and sends `sent` of them;
     * `rest()` sends the others; `answer` is the response.
     */
    function startUpload(url: string, bytes: Buffer, sent: number) {
      let answered!: (value: { status: number; body: Json }) => void;
      let failed!: (error: Error) => void;
      const answer = new Promise<{ status: number; body: Json }>((resolve, reject) => {
        answered = resolve;
        failed = reject;
      });
      const req = http.request(
        `${base}${pathOf(url)}`,
        { method: 'PUT', agent: false, headers: { 'content-type': 'application/octet-stream', 'content-length': bytes.length } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString();
            try {
              checkResponse('PUT', pathOf(url), res.statusCode!, res.headers, text);
              answered({ status: res.statusCode!, body: JSON.parse(text) as Json });
            } catch (error) {
              failed(error as Error);
            }
          });
          res.on('error', failed);
        },
      );
      req.on('error', failed);
      req.write(bytes.subarray(0, sent));
      return { answer, rest: () => req.end(bytes.subarray(sent)) };
    }

    async function send(url: string, bytes: Buffer) {
      const upload = startUpload(url, bytes, 0);
      upload.rest();
      return upload.answer;
    }

    const reset = async (orgId: string): Promise<SandboxReset> => resetSandbox(h.db.kysely, await openBlobStore(h.config), orgId, OPERATOR);

    /** What must hold after the race, whatever its order. */
    async function checkAfter(s: Awaited<ReturnType<typeof setUp>>, raced: string) {
      // The raced file is gone, and so are its bytes, its staging leftovers and its ledger rows.
      expect((await h.call(s.test, 'GET', `/api/v1/files/${raced}`)).statusCode).toBe(404);
      expect((await probe.blobs()).filter((key) => key.includes(raced))).toEqual([]);
      expect(await probe.leftovers()).toEqual([]);
      const ledger = await h.db.kysely.selectFrom('blob_purges').select('storage_key').execute();
      expect(ledger.filter((row) => row.storage_key.includes(s.sandbox))).toEqual([]);
      const events = await h.db.kysely.selectFrom('events').select('type').where('org_id', '=', s.sandbox).execute();
      expect(events).toEqual([]);

      // A file made after the reset is kept, bytes and all.
      const later = await reserve(s.test, 3);
      expect((await send(later.upload_url, Buffer.from('new'))).status).toBe(200);
      const listed = (await h.call(s.test, 'GET', '/api/v1/files')).json<{ data: Json[] }>().data;
      expect(listed.map((f) => f.id)).toEqual([later.id]);
      expect((await probe.blobs()).filter((key) => key.includes(s.sandbox))).toHaveLength(1);

      // The live organisation's file is untouched.
      expect((await h.call(s.live, 'GET', `/api/v1/files/${s.liveFile}`)).json()).toMatchObject({
        status: 'ready',
        sha256: sha256(s.liveBytes),
      });
      expect((await probe.blobs()).filter((key) => key.includes(s.liveFile))).toHaveLength(1);
      const link = (await h.call(s.live, 'GET', `/api/v1/files/${s.liveFile}/download`)).json<{ url: string }>();
      const downloaded = await h.app.inject({ method: 'GET', url: pathOf(link.url) });
      expect(downloaded.statusCode).toBe(200);
      expect(sha256(downloaded.rawPayload)).toBe(sha256(s.liveBytes));
    }

    it('an upload whose body is still arriving when the reset runs is answered 404 and leaves nothing', async () => {
      const s = await setUp();
      const bytes = randomBytes(SIZE);
      const file = await reserve(s.test, SIZE);
      const upload = startUpload(file.upload_url, bytes, (SIZE * 2) / 3);
      // The upload has found its file and is streaming to the store.
      await waitFor('bytes in the store', async () => (await probe.receivedBytes()) >= 5 * MiB);

      expect(await reset(s.org.orgId)).toMatchObject({ files: 1, bytes_pending: 0 });
      upload.rest();
      const answer = await upload.answer;
      expect(answer.status).toBe(404);
      expect(answer.body).toMatchObject({ code: 'not_found' });
      await checkAfter(s, file.id);
    });

    describe.skipIf(dialect !== 'postgres')('with the transactions caught half-way (PostgreSQL)', () => {
      // `locker` holds the locks; `watcher` looks at who waits for them (in a connection of its
      // own: pg_stat_activity is read once per transaction, and the locker's stays open).
      let locker: pg.Client;
      let watcher: pg.Client;
      let lockerPid: number;
      beforeAll(async () => {
        locker = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
        watcher = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
        await Promise.all([locker.connect(), watcher.connect()]);
        await locker.query(`SET search_path TO "${h.db.schema}"`);
        lockerPid = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      });
      afterAll(async () => {
        await locker.end();
        await watcher.end();
      });

      /** The backends waiting for a lock `pid` holds whose statement matches `like`. */
      async function waitingOn(pid: number, like: string): Promise<number[]> {
        const { rows } = await watcher.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) AND query ILIKE $2`,
          [pid, like],
        );
        return rows.map((row) => row.pid);
      }

      it('an upload whose body finishes while the reset is under way is answered 404 and leaves nothing', async () => {
        const s = await setUp();
        const contact = (await h.call(s.test, 'POST', '/api/v1/contacts', { first_name: 'Ada', email: 'ada@example.com' })).json<Json>();
        const bytes = randomBytes(SIZE);
        const file = await reserve(s.test, SIZE);
        const upload = startUpload(file.upload_url, bytes, (SIZE * 2) / 3);
        await waitFor('bytes in the store', async () => (await probe.receivedBytes()) >= 5 * MiB);

        // The reset stops half-way, at the sandbox's contacts, its transaction open.
        await locker.query('BEGIN');
        await locker.query('SELECT id FROM contacts WHERE id = $1 FOR UPDATE', [contact.id]);
        const resetting = reset(s.org.orgId);
        let answered = false;
        void upload.answer.finally(() => (answered = true)).catch(() => undefined);
        try {
          let resetter = 0;
          await waitFor('the reset to wait at the contacts', async () => {
            resetter = (await waitingOn(lockerPid, 'delete from%contacts%'))[0] ?? 0;
            return resetter !== 0;
          });
          upload.rest();
          // The reset has deleted the file (uncommitted): the upload's claim waits for the reset's
          // transaction. (Before the fix, the upload completed here, answered 200.)
          await waitFor(
            'the upload to wait for the reset, or to answer',
            async () => answered || (await waitingOn(resetter, 'update%files%')).length > 0,
          );
        } finally {
          await locker.query('ROLLBACK');
        }
        const answer = await upload.answer;
        expect(answer.status).toBe(404);
        expect(answer.body).toMatchObject({ code: 'not_found' });
        expect(await resetting).toMatchObject({ files: 1, contacts: 1, bytes_pending: 0 });
        await checkAfter(s, file.id);
      });

      it('an upload whose file turns ready while the reset deletes the files is answered 200, then the file goes with its bytes', async () => {
        const s = await setUp();
        const endpoint = await createEndpoint(
          { db: h.db.kysely, orgId: s.sandbox, actor: { kind: 'operator' }, now: new Date() },
          { allowPrivateUrls: true },
          { url: 'http://127.0.0.1:9/test' },
        );
        const bytes = randomBytes(SIZE);
        const file = await reserve(s.test, SIZE);

        // The upload's last transaction (file ready, its event, its webhook delivery) stops at the
        // delivery, which references the endpoint locked here: the file is ready in it, uncommitted.
        await locker.query('BEGIN');
        await locker.query('SELECT id FROM webhook_endpoints WHERE id = $1 FOR UPDATE', [endpoint.id]);
        const upload = startUpload(file.upload_url, bytes, 0);
        let resetting: Promise<SandboxReset> | undefined;
        try {
          upload.rest();
          let uploader = 0;
          await waitFor('the upload to wait at its webhook delivery', async () => {
            uploader = (await waitingOn(lockerPid, 'insert into%webhook_deliveries%'))[0] ?? 0;
            return uploader !== 0;
          });
          // The reset runs until it waits for the upload's transaction (the file's row).
          resetting = reset(s.org.orgId);
          await waitFor('the reset to wait for the upload', async () => (await waitingOn(uploader, 'delete from%files%')).length > 0);
        } finally {
          await locker.query('ROLLBACK');
        }
        const answer = await upload.answer;
        expect(answer.status).toBe(200);
        expect(answer.body).toMatchObject({ id: file.id, status: 'ready', sha256: sha256(bytes) });
        expect(await resetting).toMatchObject({ files: 1, bytes_pending: 0 });
        await checkAfter(s, file.id);
      });
    });
  },
);

/*
 * 4. The reset runs while an upload that has claimed its file copies its bytes into place (S3
 *    store, the copy held by a proxy). The reset queues those bytes in the purge ledger for when
 *    the claim lapses (as deleteFile does); the upload, finding its file gone once the copy is
 *    done, answers 404 and removes them, or, when the store refuses that delete, leaves them to
 *    housekeeping, which finds them in the ledger. (Before, the reset queued nothing for a file
 *    without a storage_key: bytes the upload could not remove stayed in the bucket for good.)
 */
describe.each(DIALECTS)('resetting the test data while an upload copies its bytes into place, on %s, s3 store', (dialect) => {
  let h: Harness;
  let gate: S3Gate;
  let bucket: string;
  beforeAll(async () => {
    gate = await S3Gate.start(s3.endpoint);
    const made = await s3.newBucket();
    bucket = made.bucket;
    h = await makeHarness(dialect, { env: { ...made.env, S3_ENDPOINT: gate.endpoint } });
  });
  afterAll(async () => {
    await h.close();
    await gate.close();
  });

  const objectsOf = async (id: string) => (await s3.keys(bucket)).filter((key) => key.includes(id));
  const ledger = async (id: string) =>
    (await h.db.kysely.selectFrom('blob_purges').select(['storage_key', 'purge_after']).execute()).filter((row) =>
      row.storage_key.includes(id),
    );

  for (const storeRefuses of [false, true]) {
    it(`queues the bytes for purge; the upload answers 404 and ${storeRefuses ? 'housekeeping' : 'it'} removes them`, async () => {
      const org = await h.newOrg();
      const live = await org.key(ALL_SCOPES);
      const test = await org.key(ALL_SCOPES, { mode: 'test' });
      const reserve = async (key: string) =>
        (await h.call(key, 'POST', '/api/v1/files', { name: 'a.txt', content_type: 'text/plain', size: 5 })).json<{
          id: string;
          upload_url: string;
        }>();
      const liveFile = await reserve(live);
      expect((await h.app.inject({ method: 'PUT', url: pathOf(liveFile.upload_url), payload: 'live!' })).statusCode).toBe(200);
      const file = await reserve(test);

      gate.holdCopies = true;
      const uploading = h.app.inject({ method: 'PUT', url: pathOf(file.upload_url), payload: 'test!' });
      try {
        await waitFor('the upload to copy its bytes into place', () => gate.waiting > 0);
        const claimed = await h.db.kysely
          .selectFrom('files')
          .select('upload_claimed_at')
          .where('id', '=', file.id)
          .executeTakeFirstOrThrow();
        expect(claimed.upload_claimed_at).not.toBeNull();

        expect(await resetSandbox(h.db.kysely, await openBlobStore(h.config), org.orgId, OPERATOR)).toMatchObject({
          files: 1,
          bytes_pending: 0,
        });
        // Queued for when the claim lapses: removed earlier, the copy could land after the purge.
        const lapses = new Date(Date.parse(claimed.upload_claimed_at!) + UPLOAD_CLAIM_LEASE_MS).toISOString();
        expect(await ledger(file.id)).toEqual([{ storage_key: expect.stringContaining(file.id), purge_after: lapses }]);
        gate.refuseDeletes = storeRefuses;
      } finally {
        gate.release();
      }
      const answer = await uploading;
      gate.refuseDeletes = false;
      expect(answer.statusCode).toBe(404);
      expect(answer.json()).toMatchObject({ code: 'not_found' });

      if (storeRefuses) {
        // The copy landed and the store refused its removal: the ledger still names it.
        expect(await objectsOf(file.id)).toHaveLength(1);
        expect(await ledger(file.id)).toHaveLength(1);
        await purgeDueBlobs(h.db.kysely, await openBlobStore(h.config), new Date(Date.now() + UPLOAD_CLAIM_LEASE_MS + 60_000));
      }
      expect(await objectsOf(file.id)).toEqual([]);
      expect(await ledger(file.id)).toEqual([]);
      expect((await h.call(test, 'GET', `/api/v1/files/${file.id}`)).statusCode).toBe(404);
      // The live file is untouched.
      expect((await h.call(live, 'GET', `/api/v1/files/${liveFile.id}`)).json()).toMatchObject({ status: 'ready' });
      expect(await objectsOf(liveFile.id)).toHaveLength(1);
    });
  }
});
