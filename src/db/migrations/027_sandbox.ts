import type { Kysely } from 'kysely';

// Test mode (SANDBOX.md): each organisation's sandbox is an organisation row of its own, linked to
// the live one by `live_org_id` (null on a live organisation). Every table already keyed by
// org_id (contacts, labels, groups, files, events, webhooks, API keys, the request log, usage,
// idempotency keys) therefore keeps the sandbox's data apart with the queries it has: nothing new
// to remember in any of them. A sandbox has no members, invitations, SSO or policy of its own (the
// live organisation's apply), so no session can ever be opened in it. At most one sandbox per
// organisation (the unique index, which also finds it); it goes when its organisation does.
// Sandbox ids begin `sbx_` (domain/orgs/sandbox.ts), so the mode of a row is known from its org_id
// without a read. The link declares no foreign key: SQLite cannot drop a column that is part of one
// (down), and organisations are never deleted.

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('orgs').addColumn('live_org_id', 'text').execute();
  await db.schema.createIndex('orgs_live_org_id').on('orgs').column('live_org_id').unique().execute();
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations must not depend on the evolving Database type
export async function down(db: Kysely<any>): Promise<void> {
  // The sandboxes go, and their data with them (every org_id cascades from orgs).
  await db.deleteFrom('orgs').where('live_org_id', 'is not', null).execute();
  await db.schema.dropIndex('orgs_live_org_id').execute();
  await db.schema.alterTable('orgs').dropColumn('live_org_id').execute();
}
