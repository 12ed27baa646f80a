import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../src/db/database.js';
import { ValidationError } from '../src/domain/errors.js';
import { MAX_ENDPOINTS_PER_ORG } from '../src/domain/webhooks/endpoints.js';
import { removeMember, setRole } from '../src/domain/orgs/orgs.js';
import { addMember, DIALECTS, freshDatabase, makeHarness, type Harness } from './helpers/harness.js';
import { endpointFor } from './helpers/webhooks.js';

/**
 * Per-organisation limits checked by counting and then writing hold under concurrent requests
 * from two instances (on PostgreSQL: two connection pools over one database; on SQLite: one
 * file, whose transactions take turns).
 */
describe.each(DIALECTS)('per-organisation limits under concurrency on %s', (dialect) => {
  let h: Harness;
  let second: Db;
  beforeAll(async () => {
    h = await makeHarness(dialect);
    second = dialect === 'postgres' ? await freshDatabase('postgres', { schema: h.db.schema! }) : h.db;
  });
  afterAll(async () => {
    if (second !== h.db) await second.close();
    await h.close();
  });

  it(`never lets concurrent creates pass ${MAX_ENDPOINTS_PER_ORG} webhook endpoints`, async () => {
    const org = await h.newOrg();
    for (let i = 0; i < MAX_ENDPOINTS_PER_ORG - 4; i++) await endpointFor(h.db.kysely, org.orgId, `https://93.184.216.34/pre/${i}`);
    const results = await Promise.allSettled(
      Array.from({ length: 16 }, (_, i) => endpointFor((i % 2 ? second : h.db).kysely, org.orgId, `https://93.184.216.34/race/${i}`)),
    );
    const created = results.filter((r) => r.status === 'fulfilled');
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(created).toHaveLength(4);
    expect(refused).toHaveLength(12);
    for (const r of refused) {
      expect(r.reason).toBeInstanceOf(ValidationError);
      expect((r.reason as ValidationError).message).toContain(`at most ${MAX_ENDPOINTS_PER_ORG} webhook endpoints`);
    }
    const rows = await h.db.kysely.selectFrom('webhook_endpoints').select('id').where('org_id', '=', org.orgId).execute();
    expect(rows).toHaveLength(MAX_ENDPOINTS_PER_ORG);
  });

  it('keeps at least one admin when two admins are demoted or removed at once', async () => {
    for (const action of ['demote', 'remove'] as const) {
      const org = await h.newOrg();
      const other = await addMember(h, org.orgId, 'admin');
      const change = (db: Db, email: string) =>
        action === 'demote'
          ? setRole(db.kysely, { orgId: org.orgId, email, role: 'member' })
          : removeMember(db.kysely, { orgId: org.orgId, email });
      const results = await Promise.allSettled([change(h.db, org.adminEmail), change(second, other.email)]);
      expect(results.map((r) => r.status).sort(), action).toEqual(['fulfilled', 'rejected']);
      const admins = await h.db.kysely
        .selectFrom('memberships')
        .select('user_id')
        .where('org_id', '=', org.orgId)
        .where('role', '=', 'admin')
        .execute();
      expect(admins, action).toHaveLength(1);
    }
  });
});
