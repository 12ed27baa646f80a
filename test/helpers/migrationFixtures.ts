import { createHash } from 'node:crypto';
import { secretFingerprint } from '../../src/db/secretFingerprint.js';
import { generateKey, hashKey } from '../../src/domain/apiKeys/format.js';
import { newId } from '../../src/domain/ids.js';
import {
  contactObject,
  decomposed,
  insertContact,
  insertEvent,
  insertFile,
  insertLabel,
  legacy,
  linkLabel,
  type Fixture,
} from './fixtureRows.js';
import { SECRET } from './harness.js';
import { legacySsoAccounts } from './legacySsoFixtures.js';

export { newFixture } from './fixtureRows.js';

// Data as a database held it at each migration, written with raw SQL in the tables' shape of that
// time, for test/upgrade.test.ts: it builds a database at migration M, runs the fixtures of 001…M
// (each adds what its own migration's tables and columns allow, in the shape at M: see `has`),
// upgrades it, and reads everything back through today's domain functions against `Seed`.
// A new migration needs its fixture here, or the upgrade test fails by the migration's name.

// Each migration's fixture: what its own tables and columns allow, in the shape at M.
export const FIXTURES: Record<string, (f: Fixture) => Promise<void>> = {
  async '001_core'(f) {
    const { db, seed } = f;
    const at = f.at();
    await db.insertInto('orgs').values({ id: seed.orgId, name: 'Analytical Engines', created_at: at }).execute();
    await db.insertInto('orgs').values({ id: seed.otherOrgId, name: 'Another org', created_at: at }).execute();
    // A real argon2id hash (of a password nobody knows): the row as the app wrote it.
    const passwordHash = '$argon2id$v=19$m=19456,t=2,p=1$K5BWKk/bPAlrl4v/ZWs2wA$yhcaNsxp6MjBS7FKwUzeZG63UYYeO8gNHV8hu6CLuf8';
    const email = `admin-${seed.adminId.toLowerCase()}@example.com`;
    await db
      .insertInto('users')
      .values({ id: seed.adminId, email, email_lower: email, name: 'Admin', password_hash: passwordHash, created_at: at })
      .execute();
    await db.insertInto('memberships').values({ org_id: seed.orgId, user_id: seed.adminId, role: 'admin', created_at: at }).execute();
    const key = async (revoked: boolean) => {
      const plain = generateKey(SECRET);
      await db
        .insertInto('api_keys')
        .values({
          id: newId('key'),
          org_id: seed.orgId,
          name: revoked ? 'old key' : 'sync key',
          key_hash: hashKey(SECRET, plain),
          last4: plain.slice(-4),
          scopes: 'contacts:write groups:write files:write',
          created_by: seed.adminId,
          created_at: at,
          expires_at: '2099-01-01T00:00:00.000Z',
          revoked_at: revoked ? at : null,
          revoked_reason: revoked ? 'manual' : null,
        })
        .execute();
      return plain;
    };
    seed.apiKey = await key(false);
    seed.revokedApiKey = await key(true);
    const vip = await insertLabel(f, 'VIP');
    await insertLabel(f, 'Newsletter');
    await insertContact(f, {
      first_name: 'Ada',
      last_name: 'Lovelace',
      storedEmail: 'ada@example.com',
      email: 'ada@example.com',
      labelIds: [vip],
    });
    // Stored before domains were normalised: an ACE (`xn--`) domain in capitals, a capitalised one.
    await insertContact(f, {
      first_name: 'Bertha',
      last_name: 'Buch',
      storedEmail: legacy(f, 'Ada@XN--BCHER-KVA.example', 'Ada@bücher.example'),
      email: 'Ada@bücher.example',
      source: 'import',
    });
    await insertContact(f, {
      first_name: 'Zoë',
      last_name: 'Ångström',
      storedEmail: legacy(f, 'Zoe@Example.COM', 'Zoe@example.com'),
      email: 'Zoe@example.com',
      phone: '+44 20 7946 0958',
    });
    // Stored before emails were put in NFC: the local part's ü as u and a combining diaeresis.
    await insertContact(f, {
      first_name: 'Jürgen',
      last_name: 'Müller',
      storedEmail: decomposed(f, 'ju\u0308rgen@example.de'),
      email: 'j\u00fcrgen@example.de',
    });
    // The same address in another organisation: each keeps its own.
    await insertContact(f, {
      orgId: seed.otherOrgId,
      first_name: 'Ada',
      last_name: 'Other',
      storedEmail: 'ada@example.com',
      email: 'ada@example.com',
    });
    const body = JSON.stringify({ object: 'contact', id: seed.contacts[0]!.id });
    seed.idempotency = { key: `idem-${seed.orgId}`, fingerprint: 'f'.repeat(64), body };
    const now = Date.now();
    await db
      .insertInto('idempotency_keys')
      .values({
        org_id: seed.orgId,
        key: seed.idempotency.key,
        fingerprint: seed.idempotency.fingerprint,
        state: 'done',
        locked_until: new Date(now - 60_000).toISOString(),
        response_status: 201,
        response_headers: JSON.stringify({ 'content-type': 'application/json; charset=utf-8' }),
        response_body: body,
        created_at: new Date(now - 120_000).toISOString(),
        expires_at: new Date(now + 3_600_000).toISOString(),
      })
      .execute();
  },
  async '002_groups_files'(f) {
    const at = f.at();
    const group = { id: newId('grp'), name: 'Engineers', memberIds: [] as string[], metadata: {} };
    await f.db
      .insertInto('groups')
      .values({ id: group.id, org_id: f.seed.orgId, name: group.name, description: 'who builds', created_at: at, updated_at: at })
      .execute();
    // Added out of contact order: members list in the order they were added.
    for (const contact of [f.seed.contacts[2]!, f.seed.contacts[0]!]) {
      await f.db
        .insertInto('group_members')
        .values({ org_id: f.seed.orgId, group_id: group.id, contact_id: contact.id, added_at: f.at() })
        .execute();
      group.memberIds.push(contact.id);
    }
    f.seed.groups.push(group);
    await insertFile(f, 'notes.txt', 'ready');
    await insertFile(f, 'pending.txt', 'pending');
  },
  async '003_sessions'(f) {
    const token = `session-token-${f.seed.orgId}`;
    await f.db
      .insertInto('sessions')
      .values({
        id_hash: createHash('sha256').update(token).digest('hex'),
        user_id: f.seed.adminId,
        org_id: f.seed.orgId,
        csrf_token: 'csrf',
        created_at: f.at(),
        expires_at: '2099-01-01T00:00:00.000Z',
      })
      .execute();
    f.seed.sessionToken = token;
  },
  async '004_events_webhooks'(f) {
    for (const contact of f.seed.contacts) await insertEvent(f, 'contact.created', contactObject(contact));
    const at = f.at();
    const endpointId = newId('we');
    await f.db
      .insertInto('webhook_endpoints')
      .values({
        id: endpointId,
        org_id: f.seed.orgId,
        url: 'https://hooks.example.com/orgdata',
        events: JSON.stringify(['contact.*']),
        secret: 'whsec_c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0',
        status: 'enabled',
        consecutive_failures: 1,
        failing_since: at,
        created_by: f.seed.adminId,
        created_at: at,
        updated_at: at,
      })
      .execute();
    const delivery = (status: string, eventId: string) => ({
      id: newId('msg'),
      org_id: f.seed.orgId,
      endpoint_id: endpointId,
      event_id: eventId,
      event_type: 'contact.created',
      status,
      attempts: status === 'pending' ? 0 : 1,
      next_attempt_at: at,
      created_at: at,
      updated_at: at,
    });
    const done = delivery('failed', f.seed.events[0]!);
    await f.db
      .insertInto('webhook_deliveries')
      .values([done, delivery('pending', f.seed.events[1]!)])
      .execute();
    await f.db
      .insertInto('webhook_attempts')
      .values({
        id: newId('att'),
        org_id: f.seed.orgId,
        delivery_id: done.id,
        endpoint_id: endpointId,
        attempted_at: at,
        status_code: 500,
        error: null,
        latency_ms: 42,
        response_excerpt: 'oops',
      })
      .execute();
    f.seed.endpoint = { id: endpointId, attempts: 1, pending: 1 };
  },
  async '005_list_indexes'(f) {
    await insertFile(f, 'report.pdf', 'ready');
  },
  async '006_contact_label_order'(f) {
    // A label given long after the contact was made: the link keeps the contact's created_at.
    await linkLabel(f, f.seed.contacts[1]!, f.seed.labels[0]!.id);
  },
  async '007_event_resource_order'(f) {
    await insertEvent(f, 'label.created', { object: 'label', id: f.seed.labels[1]!.id });
    await insertEvent(f, 'group.created', { object: 'group', id: f.seed.groups[0]!.id });
  },
  async '008_drop_events_age'(f) {
    await insertEvent(f, 'contact.updated', contactObject(f.seed.contacts[0]!));
  },
  async '009_blob_purges'(f) {
    await insertFile(f, 'claimed.bin', 'pending', true);
    await f.db
      .insertInto('blob_purges')
      .values({ storage_key: `${f.seed.orgId}/gone`, purge_after: f.at() })
      .execute();
    f.seed.rows.push({ table: 'blob_purges', where: { storage_key: `${f.seed.orgId}/gone` } });
  },
  async '010_settings'(f) {
    await f.db
      .insertInto('settings')
      .values({ name: 'secret_fingerprint', value: secretFingerprint(SECRET), updated_at: f.at() })
      .execute();
    f.seed.rows.push({ table: 'settings', where: { name: 'secret_fingerprint' } });
  },
  async '011_source_types'(f) {
    await insertContact(f, {
      first_name: 'Grace',
      last_name: 'Hopper',
      storedEmail: 'grace@navy.example',
      email: 'grace@navy.example',
      source: 'api',
    });
    await insertContact(f, {
      first_name: 'Alan',
      last_name: 'Turing',
      storedEmail: 'alan@bletchley.example',
      email: 'alan@bletchley.example',
      source: 'csv_import',
    });
  },
  async '012_contact_sync'(f) {
    await insertContact(f, {
      first_name: 'Katherine',
      last_name: 'Johnson',
      storedEmail: 'katherine@nasa.example',
      email: 'katherine@nasa.example',
      external_id: 'crm-42',
      metadata: { tier: 'gold', region: 'us' },
      labelIds: [f.seed.labels[1]!.id],
    });
    const group = f.seed.groups[0]!;
    group.metadata = { team: 'core' };
    await f.db
      .updateTable('groups')
      .set({ metadata: JSON.stringify(group.metadata) })
      .where('id', '=', group.id)
      .execute();
  },
  async '013_contact_search'(f) {
    await insertContact(f, { first_name: 'Émile', last_name: 'Zola', storedEmail: 'emile@zola.example', email: 'emile@zola.example' });
  },
  async '014_search_prefixes'(f) {
    // Longer than the six characters the terms keep: found by its prefix, checked on the row.
    await insertContact(f, {
      first_name: 'Bartholomew',
      last_name: 'Roberts',
      storedEmail: 'bart@pirates.example',
      email: 'bart@pirates.example',
    });
  },
  async '015_contact_email_domains'(f) {
    await insertContact(f, { first_name: 'Ünal', last_name: 'Bücher', storedEmail: 'unal@bücher.example', email: 'unal@bücher.example' });
  },
  async '016_event_actors'(f) {
    const contact = f.seed.contacts[0]!;
    await insertEvent(f, 'contact.updated', contactObject(contact), {
      actor_type: 'user',
      actor_id: f.seed.adminId,
      request_id: 'req_fixture016',
    });
    await insertEvent(f, 'contact.updated', contactObject(contact), { actor_type: 'system', actor_id: null, request_id: null });
  },
  async '017_request_log'(f) {
    const at = f.at();
    const requestId = `req_fixture017${f.seed.orgId.slice(-6)}`;
    await f.db
      .insertInto('request_log')
      .values({
        request_id: requestId,
        org_id: f.seed.orgId,
        key_id: 'key_fixture',
        at,
        method: 'GET',
        route: '/api/v1/contacts',
        status: 200,
        error_code: null,
        duration_ms: 1.25,
        origin: '127.0.0.0/24 · curl',
      })
      .execute();
    await f.db
      .insertInto('request_usage')
      .values({ org_id: f.seed.orgId, key_id: 'key_fixture', day: at.slice(0, 10), class: '2xx', count: 1 })
      .execute();
    f.seed.rows.push({ table: 'request_log', where: { request_id: requestId } });
    f.seed.rows.push({ table: 'request_usage', where: { org_id: f.seed.orgId, key_id: 'key_fixture' } });
  },
  // An index only (events_system): no data of its own.
  async '018_event_system_actor'() {},
  // Emails in NFC: its decomposed address is in 001's contacts (Jürgen), composed from 019 on.
  async '019_contact_email_nfc'() {},
  // A pending invitation and an unused reset link (hashes of tokens nobody holds).
  async '020_invitations_password_resets'(f) {
    const at = f.at();
    const later = new Date(Date.parse(at) + 3600_000).toISOString();
    const hash = (text: string) => createHash('sha256').update(text).digest('hex');
    const invitation = `inv_fixture020${f.seed.orgId.slice(-6)}`;
    await f.db
      .insertInto('invitations')
      .values({
        id: invitation,
        org_id: f.seed.orgId,
        email: 'invited@example.com',
        email_lower: 'invited@example.com',
        role: 'member',
        token_hash: hash(`invite ${invitation}`),
        invited_by: f.seed.adminId,
        created_at: at,
        sent_at: at,
        expires_at: later,
        accepted_at: null,
        accepted_by: null,
        revoked_at: null,
      })
      .execute();
    const reset = `pwr_fixture020${f.seed.orgId.slice(-6)}`;
    await f.db
      .insertInto('password_resets')
      .values({ id: reset, user_id: f.seed.adminId, token_hash: hash(`reset ${reset}`), created_at: at, expires_at: later, used_at: null })
      .execute();
    f.seed.rows.push({ table: 'invitations', where: { id: invitation } });
    f.seed.rows.push({ table: 'password_resets', where: { id: reset } });
  },
  // A confirmed TOTP factor with one recovery code, a passkey, and an organisation's SSO with its
  // domain and a linked identity (sealed secrets are opaque text to an upgrade).
  async '021_sign_in_factors'(f) {
    const at = f.at();
    const suffix = f.seed.orgId.slice(-6);
    const hash = (text: string) => createHash('sha256').update(text).digest('hex');
    await f.db
      .insertInto('totp_factors')
      .values({ user_id: f.seed.adminId, secret_sealed: 'v1.fixture', created_at: at, confirmed_at: at, last_step: 1 })
      .execute();
    const code = `rc_fixture021${suffix}`;
    await f.db
      .insertInto('recovery_codes')
      .values({ id: code, user_id: f.seed.adminId, code_hash: hash(code), created_at: at, used_at: null })
      .execute();
    const passkey = `pk_fixture021${suffix}`;
    await f.db
      .insertInto('passkeys')
      .values({
        id: passkey,
        user_id: f.seed.adminId,
        credential_id: `cred-${suffix}`,
        public_key: 'cHVibGlj',
        sign_count: 3,
        transports: '["internal"]',
        name: 'Laptop',
        created_at: at,
        last_used_at: null,
      })
      .execute();
    await f.db
      .insertInto('sso_configs')
      .values({
        org_id: f.seed.orgId,
        issuer: 'https://id.example.com',
        client_id: 'orgdata',
        client_secret_sealed: 'v1.fixture',
        auto_join: 'off',
        required: 'no',
        created_at: at,
        updated_at: at,
      })
      .execute();
    const domain = `fixture-${suffix.toLowerCase()}.example.com`;
    // From 023 on, a domain is a claim with its token (unverified here, as 023 leaves old rows).
    const claim = f.has('023_sso_domain_verification')
      ? { token: `token021${suffix}`, created_at: at, verified_at: null, verified_method: null }
      : {};
    await f.db
      .insertInto('sso_domains')
      .values({ domain, org_id: f.seed.orgId, ...claim })
      .execute();
    await f.db
      .insertInto('sso_identities')
      .values({ issuer: 'https://id.example.com', subject: `sub-${suffix}`, user_id: f.seed.adminId, created_at: at })
      .execute();
    const challenge = hash(`challenge ${suffix}`);
    await f.db
      .insertInto('auth_challenges')
      .values({
        id_hash: challenge,
        purpose: 'two_factor',
        user_id: f.seed.adminId,
        data: '{}',
        attempts: 0,
        created_at: at,
        expires_at: at,
      })
      .execute();
    f.seed.rows.push({ table: 'auth_challenges', where: { id_hash: challenge } });
    f.seed.rows.push({ table: 'totp_factors', where: { user_id: f.seed.adminId } });
    f.seed.rows.push({ table: 'recovery_codes', where: { id: code } });
    f.seed.rows.push({ table: 'passkeys', where: { id: passkey } });
    f.seed.rows.push({ table: 'sso_configs', where: { org_id: f.seed.orgId } });
    f.seed.rows.push({ table: 'sso_domains', where: { domain } });
    // The admin had a password before this link: 026 drops the link (consent at /sso/link next time).
    f.seed.rows.push({ table: 'sso_identities', where: { subject: `sub-${suffix}` }, count: f.has('026_sso_links_consent') ? 1 : 0 });
    await legacySsoAccounts(f, 'https://id.example.com');
  },
  // A recovery code made from an SSO session (added_in_sso), as the mailbox proof finds it.
  async '022_sso_trust'(f) {
    const at = f.at();
    const code = `rc_fixture022${f.seed.orgId.slice(-6)}`;
    await f.db
      .insertInto('recovery_codes')
      .values({
        id: code,
        user_id: f.seed.adminId,
        code_hash: createHash('sha256').update(code).digest('hex'),
        created_at: at,
        used_at: null,
        added_in_sso: 1,
      })
      .execute();
    f.seed.rows.push({ table: 'recovery_codes', where: { id: code } });
  },
  // Two organisations claiming one domain: the other organisation's claim verified by the
  // operator, the seed organisation's not (each with its own token).
  async '023_sso_domain_verification'(f) {
    const at = f.at();
    const suffix = f.seed.orgId.slice(-6);
    const domain = `shared-${suffix.toLowerCase()}.example.com`;
    await f.db
      .insertInto('sso_configs')
      .values({
        org_id: f.seed.otherOrgId,
        issuer: 'https://login.other.example.com',
        client_id: 'orgdata',
        client_secret_sealed: 'v1.fixture',
        auto_join: 'member',
        required: 'no',
        created_at: at,
        updated_at: at,
      })
      .execute();
    await f.db
      .insertInto('sso_domains')
      .values([
        { org_id: f.seed.otherOrgId, domain, token: `token023a${suffix}`, created_at: at, verified_at: at, verified_method: 'operator' },
        { org_id: f.seed.orgId, domain, token: `token023b${suffix}`, created_at: at, verified_at: null, verified_method: null },
      ])
      .execute();
    f.seed.rows.push({ table: 'sso_configs', where: { org_id: f.seed.otherOrgId } });
    f.seed.rows.push({ table: 'sso_domains', where: { token: `token023a${suffix}` } });
    f.seed.rows.push({ table: 'sso_domains', where: { token: `token023b${suffix}` } });
  },
  // Recovery codes as argon2id (025 wraps older SHA-256 ones); nothing new to seed.
  async '025_bounded_sign_in'() {},
  // Judges what is stored (legacySsoAccounts, written by the 021 fixture); no table or column of its own.
  async '026_sso_links_consent'() {},
  // The organisation's sandbox (test mode) with an od_test_ key and a contact of its own: the
  // upgrade keeps it apart (the live lists do not show its contact; its key reaches only it).
  async '027_sandbox'(f) {
    const at = f.at();
    const sandboxId = newId('sbx');
    await f.db
      .insertInto('orgs')
      .values({ id: sandboxId, name: 'Analytical Engines (test mode)', created_at: at, live_org_id: f.seed.orgId })
      .execute();
    const plain = generateKey(SECRET, 'test');
    await f.db
      .insertInto('api_keys')
      .values({
        id: newId('key'),
        org_id: sandboxId,
        name: 'test key',
        key_hash: hashKey(SECRET, plain),
        last4: plain.slice(-4),
        scopes: 'contacts:write',
        created_by: f.seed.adminId,
        created_at: at,
        expires_at: '2099-01-01T00:00:00.000Z',
        revoked_at: null,
        revoked_reason: null,
      })
      .execute();
    const contact = await insertContact(f, {
      orgId: sandboxId,
      first_name: 'Test',
      last_name: 'Mode',
      storedEmail: 'ada@example.com',
      email: 'ada@example.com',
    });
    f.seed.testApiKey = { key: plain, orgId: sandboxId, contactId: contact.id };
  },
  // A session column only (sessions.test_mode, default 0): every session from before is live.
  async '028_session_test_mode'() {},
};
