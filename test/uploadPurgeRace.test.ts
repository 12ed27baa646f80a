import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { purgeAbandonedUploads } from '../src/domain/files/files.js';
import { purgeDueBlobs } from '../src/domain/files/purges.js';
import { blobKey, UPLOAD_CLAIM_LEASE_MS } from '../src/domain/files/storage.js';
import { createEndpoint } from '../src/domain/webhooks/endpoints.js';
import { STAGING_PREFIX } from '../src/infra/blobs/s3BlobStore.js';
import { openBlobStore } from '../src/infra/choose.js';
import { STORES, storeHarness, type StoreProbe } from './helpers/blobStores.js';
import { checkResponse } from './helpers/contract.js';
import { ALL_SCOPES, DIALECTS, makeHarness, type Harness } from './helpers/harness.js';
import { LocalS3 } from './helpers/localS3.js';
import { S3Gate } from './helpers/s3Gate.js';

/*
 * Housekeeping's purge of abandoned uploads (purgeAbandonedUploads, run periodically by the
 * server; called here in the test process on the server's database and store) racing an upload
 * of a file whose link expires meanwhile: the link was good when the PUT came in, and the purge
 * runs with a clock (its `now`) just past the link's expiry, short of the lapse of the upload's
 * claim (the links live 60 s here, a claim 120 s).
 *
 * An upload (receiveUpload) stages the body, claims its `pending` file (`upload_claim`), copies the
 * bytes to the file's key, then turns the file `ready` in one transaction with its event and
 * webhook deliveries; when the file is gone by then it removes the bytes it copied (404). The
 * purge deletes the expired `pending` files and queues the bytes of those an upload has claimed,
 * for when the claim lapses (the copy may still land until then). The orders that matter:
 *
 * 1. The upload copies its bytes into place (S3 store, the copy held by a proxy) when the purge
 *    runs whole (every dialect): the file goes, its bytes are queued; the upload answers 404 and
 *    removes them, or, when the store refuses that delete, housekeeping does.
 * 2. The upload claims its file after the purge read the claimed files and before it deleted
 *    them (PostgreSQL, read committed; the purge held there on a row of the purge ledger, S3
 *    store, the copy held). Before the fix the file was deleted with no purge queued: when the
 *    store refused the upload's delete of its copy, the bytes stayed with nothing naming them.
 * 3. The upload's completing transaction is open (the file `ready` in it, held at its webhook
 *    delivery) when the purge reads and deletes (PostgreSQL, both stores). The purge waits for it
 *    and keeps the ready file. Before the fix it had queued the file's bytes from its read anyway,
 *    and housekeeping deleted them once the claim lapsed: a ready file with no bytes.
 *
 * After every order, no bytes in the store lack a row naming them (a file, or the purge ledger),
 * and housekeeping past the claim's lapse leaves exactly the bytes of ready files.
 * Waits are on states (a copy held, a backend waiting on a lock), never on time.
 */

const TTL_ENV = { UPLOAD_URL_TTL_SECONDS: '60' };
const sha256 = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');
const pathOf = (url: string) => new URL(url).pathname;
type Json = Record<string, unknown>;
interface Reservation {
  id: string;
  upload_url: string;
  upload_expires_at: string;
}

async function waitFor(what: string, condition: () => boolean | Promise<boolean>): Promise<void> {
  // A safety net against hanging, not a timing assertion.
  for (let i = 0; i < 1000; i++) {
    if (await condition()) return;
    await sleep(10);
  }
  throw new Error(`gave up waiting for ${what}`);
}

/** The purge's clock: just past the link's expiry (and well short of any claim's lapse). */
const pastExpiry = (file: Reservation) => new Date(Date.parse(file.upload_expires_at) + 1);
/** Housekeeping's clock once every claim made in this test has lapsed. */
const pastLapse = () => new Date(Date.now() + UPLOAD_CLAIM_LEASE_MS + 60_000);

/** A server of the harness listening on a real port, and PUTs to its upload links over it. */
async function uploader(h: Harness) {
  const base = await h.app.listen({ port: 0, host: '127.0.0.1' });
  return async (url: string, bytes: Buffer | string): Promise<{ status: number; body: Json }> => {
    const res = await fetch(`${base}${pathOf(url)}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/octet-stream' },
      body: typeof bytes === 'string' ? Buffer.from(bytes) : bytes,
    });
    const text = await res.text();
    checkResponse('PUT', pathOf(url), res.status, Object.fromEntries(res.headers), text);
    return { status: res.status, body: JSON.parse(text) as Json };
  };
}

/** An organisation, a key, and reservations of 5-byte files. */
async function setUp(h: Harness) {
  const org = await h.newOrg();
  const key = await org.key(ALL_SCOPES);
  const reserve = async (): Promise<Reservation> => {
    const res = await h.call(key, 'POST', '/api/v1/files', { name: 'a.txt', content_type: 'text/plain', size: 5 });
    expect(res.statusCode, res.body).toBe(201);
    return res.json();
  };
  return { org, key, reserve };
}

/** Keys of stored bytes (staging aside) that no file row and no row of the purge ledger name. */
async function unnamed(h: Harness, stored: string[]): Promise<string[]> {
  const files = await h.db.kysely.selectFrom('files').select(['id', 'org_id', 'storage_key']).execute();
  const ledger = await h.db.kysely.selectFrom('blob_purges').select('storage_key').execute();
  const named = new Set([
    ...files.flatMap((file) => [blobKey(file.org_id, file.id), ...(file.storage_key ? [file.storage_key] : [])]),
    ...ledger.map((row) => row.storage_key),
  ]);
  return stored.filter((key) => !named.has(key));
}

const ledgerOf = async (h: Harness, id: string) =>
  (await h.db.kysely.selectFrom('blob_purges').select(['storage_key', 'purge_after']).execute()).filter((row) =>
    row.storage_key.includes(id),
  );

const claimedAt = async (h: Harness, id: string) =>
  (await h.db.kysely.selectFrom('files').select('upload_claimed_at').where('id', '=', id).executeTakeFirstOrThrow()).upload_claimed_at;

/**
 * PostgreSQL connections of the test's own: `locker` holds locks (in the harness's schema),
 * `watcher` looks at who waits for them (pg_stat_activity is read once per transaction, and the
 * locker's stays open).
 */
async function pgLocks(h: Harness) {
  const locker = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  const watcher = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL });
  await Promise.all([locker.connect(), watcher.connect()]);
  await locker.query(`SET search_path TO "${h.db.schema}"`);
  const lockerPid = (await locker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  return {
    locker,
    lockerPid,
    /** The backends waiting for a lock `pid` holds whose statement matches `like`. */
    async waitingOn(pid: number, like: string): Promise<number[]> {
      const { rows } = await watcher.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) AND query ILIKE $2`,
        [pid, like],
      );
      return rows.map((row) => row.pid);
    },
    async end() {
      await locker.end();
      await watcher.end();
    },
  };
}

let s3: LocalS3;
beforeAll(async () => {
  s3 = await LocalS3.start();
});
afterAll(() => s3.close());

describe.each(DIALECTS)('purging abandoned uploads while an upload copies its bytes into place, on %s, s3 store', (dialect) => {
  let h: Harness;
  let gate: S3Gate;
  let bucket: string;
  let put: Awaited<ReturnType<typeof uploader>>;
  beforeAll(async () => {
    gate = await S3Gate.start(s3.endpoint);
    const made = await s3.newBucket();
    bucket = made.bucket;
    h = await makeHarness(dialect, { env: { ...made.env, ...TTL_ENV, S3_ENDPOINT: gate.endpoint } });
    put = await uploader(h);
  });
  afterAll(async () => {
    await h.close();
    await gate.close();
  });

  const stored = async () => (await s3.keys(bucket)).filter((key) => !key.startsWith(STAGING_PREFIX));
  const objectsOf = async (id: string) => (await stored()).filter((key) => key.includes(id));

  /** What must hold once the race is over: nothing unnamed; housekeeping removes the raced bytes. */
  async function checkAfter(key: string, raced: string[], storeRefused: boolean) {
    expect(await unnamed(h, await stored())).toEqual([]);
    if (storeRefused) await purgeDueBlobs(h.db.kysely, await openBlobStore(h.config), pastLapse());
    for (const id of raced) {
      expect(await objectsOf(id)).toEqual([]);
      expect(await ledgerOf(h, id)).toEqual([]);
      expect((await h.call(key, 'GET', `/api/v1/files/${id}`)).statusCode).toBe(404);
    }
  }

  for (const storeRefuses of [false, true]) {
    const after = storeRefuses ? 'housekeeping removes them (the store refused the upload)' : 'the upload removes them';
    it(`the purge queues the bytes of a claimed file; the upload answers 404 and ${after}`, async () => {
      const s = await setUp(h);
      const file = await s.reserve();
      gate.holdCopies = true;
      const uploading = put(file.upload_url, 'abcde');
      try {
        await waitFor('the upload to copy its bytes into place', () => gate.waiting === 1);
        const claimed = await claimedAt(h, file.id);
        expect(claimed).not.toBeNull();
        expect(await purgeAbandonedUploads(h.db.kysely, await openBlobStore(h.config), pastExpiry(file))).toBe(1);
        // Queued for when the claim lapses: removed earlier, the copy could land after the purge.
        const lapses = new Date(Date.parse(claimed!) + UPLOAD_CLAIM_LEASE_MS).toISOString();
        expect(await ledgerOf(h, file.id)).toEqual([{ storage_key: blobKey(s.org.orgId, file.id), purge_after: lapses }]);
        gate.refuseDeletes = storeRefuses;
      } finally {
        gate.release();
      }
      const answer = await uploading;
      gate.refuseDeletes = false;
      expect(answer.status).toBe(404);
      expect(answer.body).toMatchObject({ code: 'not_found' });
      expect(await objectsOf(file.id)).toHaveLength(storeRefuses ? 1 : 0);
      await checkAfter(s.key, [file.id], storeRefuses);
    });
  }

  describe.skipIf(dialect !== 'postgres')('with the purge caught between its read and its delete (PostgreSQL)', () => {
    let locks: Awaited<ReturnType<typeof pgLocks>>;
    beforeAll(async () => {
      locks = await pgLocks(h);
    });
    afterAll(() => locks.end());

    for (const storeRefuses of [false, true]) {
      const after = storeRefuses ? 'when the store refuses the delete of its copy' : 'when the store takes the delete of its copy';
      it(`an upload that claims its file meanwhile leaves no bytes unnamed, ${after}`, async () => {
        const s = await setUp(h);
        // `held`: an upload claims its file and copies (held), so that the purge queues its bytes;
        // the purge is stopped there, at that row of the ledger, which the locker holds.
        const held = await s.reserve();
        const raced = await s.reserve();
        gate.holdCopies = true;
        const heldUpload = put(held.upload_url, 'held!');
        let racedUpload: ReturnType<typeof put> | undefined;
        let answered = false;
        let purging: Promise<number> | undefined;
        try {
          await waitFor('the first upload to copy its bytes into place', () => gate.waiting === 1);
          await locks.locker.query('BEGIN');
          await locks.locker.query('INSERT INTO blob_purges (storage_key, purge_after) VALUES ($1, $2)', [
            blobKey(s.org.orgId, held.id),
            new Date().toISOString(),
          ]);
          purging = purgeAbandonedUploads(h.db.kysely, await openBlobStore(h.config), pastExpiry(raced));
          let purger = 0;
          await waitFor('the purge to wait at the ledger', async () => {
            purger = (await locks.waitingOn(locks.lockerPid, 'insert into%blob_purges%'))[0] ?? 0;
            return purger !== 0;
          });
          // The second upload comes in (its link still good) and claims its file. (Before the fix
          // the purge had read the claimed files and not yet deleted any: the claim was taken and
          // the copy held here. Now the purge has deleted the files: the claim waits for it.)
          racedUpload = put(raced.upload_url, 'race!');
          void racedUpload.finally(() => (answered = true)).catch(() => undefined);
          await waitFor(
            'the second upload to copy, to wait for the purge, or to answer',
            async () => gate.waiting === 2 || answered || (await locks.waitingOn(purger, 'update%files%')).length > 0,
          );
        } finally {
          await locks.locker.query('ROLLBACK');
        }
        expect(await purging).toBe(2);
        gate.refuseDeletes = storeRefuses;
        gate.release();
        const answers = await Promise.all([heldUpload, racedUpload!]);
        gate.refuseDeletes = false;
        for (const answer of answers) {
          expect(answer.status).toBe(404);
          expect(answer.body).toMatchObject({ code: 'not_found' });
        }
        await checkAfter(s.key, [held.id, raced.id], storeRefuses);
      });
    }
  });
});

describe.skipIf(!DIALECTS.includes('postgres')).each(STORES)(
  'purging abandoned uploads while an upload turns its file ready, on postgres, %s store',
  (store) => {
    let h: Harness;
    let probe: StoreProbe;
    let put: Awaited<ReturnType<typeof uploader>>;
    let locks: Awaited<ReturnType<typeof pgLocks>>;
    beforeAll(async () => {
      ({ h, probe } = await storeHarness('postgres', store, s3, { env: TTL_ENV }));
      put = await uploader(h);
      locks = await pgLocks(h);
    });
    afterAll(async () => {
      await locks.end();
      await h.close();
    });

    it('keeps the ready file and its bytes, and queues no purge of them', async () => {
      const s = await setUp(h);
      const endpoint = await createEndpoint(
        { db: h.db.kysely, orgId: s.org.orgId, actor: { kind: 'operator' }, now: new Date() },
        { allowPrivateUrls: true },
        { url: 'http://127.0.0.1:9/test' },
      );
      const file = await s.reserve();

      // The upload's last transaction (file ready, its event, its webhook delivery) stops at the
      // delivery, which references the endpoint locked here: the file is ready in it, uncommitted,
      // and claimed as far as anyone else can see.
      await locks.locker.query('BEGIN');
      await locks.locker.query('SELECT id FROM webhook_endpoints WHERE id = $1 FOR UPDATE', [endpoint.id]);
      const uploading = put(file.upload_url, 'ready');
      let purging: Promise<number> | undefined;
      try {
        let uploaderPid = 0;
        await waitFor('the upload to wait at its webhook delivery', async () => {
          uploaderPid = (await locks.waitingOn(locks.lockerPid, 'insert into%webhook_deliveries%'))[0] ?? 0;
          return uploaderPid !== 0;
        });
        expect(await claimedAt(h, file.id)).not.toBeNull();
        // The purge runs until its delete waits for the upload's transaction (the file's row).
        purging = purgeAbandonedUploads(h.db.kysely, await openBlobStore(h.config), pastExpiry(file));
        await waitFor(
          'the purge to wait for the upload',
          async () => (await locks.waitingOn(uploaderPid, 'delete from%files%')).length > 0,
        );
      } finally {
        await locks.locker.query('ROLLBACK');
      }
      const answer = await uploading;
      expect(answer.status).toBe(200);
      expect(answer.body).toMatchObject({ id: file.id, status: 'ready', sha256: sha256('ready') });
      expect(await purging).toBe(0);

      // Nothing queues the bytes of the ready file (before the fix: a row from the purge's read).
      expect(await ledgerOf(h, file.id)).toEqual([]);
      expect(await unnamed(h, await probe.blobs())).toEqual([]);
      // Housekeeping past the claim's lapse leaves them: the file still downloads.
      await purgeDueBlobs(h.db.kysely, await openBlobStore(h.config), pastLapse());
      expect((await probe.blobs()).filter((key) => key.includes(file.id))).toHaveLength(1);
      const link = (await h.call(s.key, 'GET', `/api/v1/files/${file.id}/download`)).json<{ url: string }>();
      const downloaded = await h.app.inject({ method: 'GET', url: pathOf(link.url) });
      expect(downloaded.statusCode).toBe(200);
      expect(sha256(downloaded.rawPayload)).toBe(sha256('ready'));
    });
  },
);
