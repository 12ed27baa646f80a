// Scratch (not committed): batchContacts natively under V8's CPU profiler, for a split by phase.
import { cpSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { batchBody } from './bodies.js';
const dist = path.join(import.meta.dirname, '..', 'dist');
const load = <T>(file: string) => import(pathToFileURL(path.join(dist, file)).href) as Promise<T>;
const { openDatabase } = await load<typeof import('../src/db/database.js')>('db/database.js');
const { batchContacts } = await load<typeof import('../src/domain/contacts/batch.js')>('domain/contacts/batch.js');
rmSync('/tmp/bl/prof/data', { recursive: true, force: true });
cpSync('/tmp/bl/seed', '/tmp/bl/prof/data', { recursive: true });
const db = openDatabase({ databaseUrl: null, dataDir: '/tmp/bl/prof/data' });
const scopes = new Set(['contacts:read', 'contacts:write'] as const);
const count = Number(process.argv[2] ?? 600);
const t = performance.now();
for (let n = 0; n < count; n++) {
  const body = batchBody(n);
  const out = await batchContacts(
    { db: db.kysely, orgId: 'org_0VcEqdqRWBbjELpJi6c5', actor: { kind: 'api_key', keyId: 'key_0VcEqdtDYBGMtzL9WmYP', scopes: scopes as never }, requestId: `req_${n}`, now: new Date() },
    body.contacts.map((input) => ({ input })),
    { mode: 'upsert', matchOn: 'external_id', atomic: false },
  );
  if (out.some((o) => 'error' in o)) throw new Error('failed');
}
console.log(((performance.now() - t) / count).toFixed(2), 'ms a batch');
await db.close();
