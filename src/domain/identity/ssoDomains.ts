import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import { isUniqueViolation } from '../../db/errors.js';
import type { Database } from '../../db/schema.js';
import { NotFoundError, ServiceError } from '../errors.js';
import { recordMemberEvent, type IdentityCause } from '../events/memberEvents.js';
import { nowIso } from '../ids.js';
import { TxtLookupFailed, type TxtLookup } from './txtLookup.js';

/**
 * An organisation's SSO domains are claims until proven (IDENTITY.md rule 9). A claim does
 * nothing — it routes no `/sso/start`, links nobody, auto-joins nobody, and blocks no other
 * organisation from claiming the same domain — until it is verified: by a DNS TXT record
 * `_orgdata-challenge.DOMAIN` holding `orgdata-verification=TOKEN` (this claim's own token),
 * looked up when an admin presses Verify, or by the operator's approval. A verified domain has one
 * owner: verifying fails while another organisation holds it verified.
 */
export const CHALLENGE_LABEL = '_orgdata-challenge';
export const RECORD_PREFIX = 'orgdata-verification=';
export type VerifiedMethod = 'dns' | 'operator';

export interface SsoDomainClaim {
  domain: string;
  status: 'verified' | 'unverified';
  /** This claim's own token (each organisation claiming a domain has its own). */
  token: string;
  /** The record to create: `name` TXT `value`. */
  record_name: string;
  record_value: string;
  created_at: string;
  verified_at: string | null;
  verified_method: VerifiedMethod | null;
}

/** Why a domain was not verified: `code` for the CLI's JSON, the message for people. */
export class DomainNotVerified extends ServiceError {
  constructor(
    readonly code: 'not_claimed' | 'no_record' | 'wrong_value' | 'dns_timeout' | 'dns_failed' | 'verified_elsewhere',
    message: string,
  ) {
    super(message);
  }
}

/** A claim's token: 192 random bits, URL-safe (it goes into a DNS record as is). */
export function newDomainToken(): string {
  return randomBytes(24).toString('base64url');
}

export function challengeRecord(domain: string, token: string): { name: string; value: string } {
  return { name: `${CHALLENGE_LABEL}.${domain}`, value: `${RECORD_PREFIX}${token}` };
}

type ClaimRow = Pick<Database['sso_domains'], 'domain' | 'token' | 'created_at' | 'verified_at' | 'verified_method'>;

function claimOf(row: ClaimRow): SsoDomainClaim {
  const record = challengeRecord(row.domain, row.token);
  return {
    domain: row.domain,
    status: row.verified_at ? 'verified' : 'unverified',
    token: row.token,
    record_name: record.name,
    record_value: record.value,
    created_at: row.created_at,
    verified_at: row.verified_at,
    verified_method: row.verified_method === 'dns' || row.verified_method === 'operator' ? row.verified_method : null,
  };
}

/** An organisation's claimed domains, verified or not, by name. */
export async function ssoDomainClaimsOf(db: Kysely<Database>, orgId: string): Promise<SsoDomainClaim[]> {
  const rows = await db
    .selectFrom('sso_domains')
    .select(['domain', 'token', 'created_at', 'verified_at', 'verified_method'])
    .where('org_id', '=', orgId)
    .orderBy('domain')
    .execute();
  return rows.map(claimOf);
}

/**
 * Makes an organisation's claims the domains listed (inside the caller's transaction): a domain
 * still listed keeps its token and its verification, a new one gets a token and starts
 * unverified, one no longer listed is let go.
 */
export async function replaceDomainClaims(trx: Kysely<Database>, orgId: string, domains: readonly string[], now: Date): Promise<void> {
  await trx.deleteFrom('sso_domains').where('org_id', '=', orgId).where('domain', 'not in', domains).execute();
  const kept = new Set(
    (await trx.selectFrom('sso_domains').select('domain').where('org_id', '=', orgId).execute()).map((row) => row.domain),
  );
  const added = domains.filter((domain) => !kept.has(domain));
  if (added.length === 0) return;
  await trx
    .insertInto('sso_domains')
    .values(
      added.map((domain) => ({
        org_id: orgId,
        domain,
        token: newDomainToken(),
        created_at: nowIso(now),
        verified_at: null,
        verified_method: null,
      })),
    )
    .execute();
}

function normalise(domain: string): string {
  return domain.trim().toLowerCase().replace(/^@/, '').replace(/\.$/, '');
}

async function claimRow(db: Kysely<Database>, orgId: string, domain: string) {
  return db
    .selectFrom('sso_domains')
    .select(['domain', 'token', 'created_at', 'verified_at', 'verified_method'])
    .where('org_id', '=', orgId)
    .where('domain', '=', domain)
    .executeTakeFirst();
}

/** The organisation that holds `domain` verified, other than `orgId`. */
async function verifiedElsewhere(db: Kysely<Database>, orgId: string, domain: string): Promise<string | null> {
  const row = await db
    .selectFrom('sso_domains')
    .select('org_id')
    .where('domain', '=', domain)
    .where('verified_at', 'is not', null)
    .where('org_id', '!=', orgId)
    .executeTakeFirst();
  return row?.org_id ?? null;
}

function takenMessage(domain: string, otherOrg: string | null, forOperator: boolean): string {
  return forOperator && otherOrg
    ? `${domain} is already verified for single sign-on by organisation ${otherOrg}: a domain leads to one organisation. Remove it from that organisation's SSO domains first.`
    : `${domain} is already verified for single sign-on by another organisation: an e-mail domain leads to one organisation only. If it should be this one, ask the operator of this orgdata.`;
}

async function claimToVerify(db: Kysely<Database>, orgId: string, domain: string, forOperator: boolean) {
  const claim = await claimRow(db, orgId, domain);
  if (!claim) {
    throw new DomainNotVerified(
      'not_claimed',
      `${domain || 'That domain'} is not one of this organisation's single sign-on domains: add it to the email domains first.`,
    );
  }
  if (!claim.verified_at) {
    const other = await verifiedElsewhere(db, orgId, domain);
    if (other) throw new DomainNotVerified('verified_elsewhere', takenMessage(domain, other, forOperator));
  }
  return claim;
}

/**
 * Marks the claim verified, unless another organisation holds the domain verified by now (the
 * partial unique index settles a race between two). `token` is the one checked: a claim made
 * again meanwhile (a new token) is not verified by the old proof.
 */
async function markVerified(
  db: Kysely<Database>,
  orgId: string,
  claim: ClaimRow,
  method: VerifiedMethod,
  cause: IdentityCause,
  now: Date,
  forOperator: boolean,
): Promise<SsoDomainClaim> {
  const org = await db.selectFrom('orgs').select(['id', 'name']).where('id', '=', orgId).executeTakeFirst();
  if (!org) throw new NotFoundError(`There is no organisation ${orgId}.`);
  try {
    await db.transaction().execute(async (trx) => {
      const other = await verifiedElsewhere(trx, orgId, claim.domain);
      if (other) throw new DomainNotVerified('verified_elsewhere', takenMessage(claim.domain, other, forOperator));
      const updated = await trx
        .updateTable('sso_domains')
        .set({ verified_at: nowIso(now), verified_method: method })
        .where('org_id', '=', orgId)
        .where('domain', '=', claim.domain)
        .where('token', '=', claim.token)
        .where('verified_at', 'is', null)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) return;
      await recordMemberEvent(trx, [orgId], 'security.sso_domain_verified', { object: 'org', id: org.id, name: org.name }, cause, now, {
        domain: claim.domain,
        method,
      });
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw new DomainNotVerified('verified_elsewhere', takenMessage(claim.domain, null, forOperator));
    throw error;
  }
  const after = await claimRow(db, orgId, claim.domain);
  if (!after?.verified_at) {
    throw new DomainNotVerified('not_claimed', `${claim.domain} was changed in the meantime: look at the domains again and retry.`);
  }
  return claimOf(after);
}

export interface Verification {
  claim: SsoDomainClaim;
  /** False when it was verified already. */
  changed: boolean;
}

/**
 * The Verify button: looks the claim's TXT record up (network I/O, outside any transaction, with
 * the lookup's deadline) and verifies the claim when one of the records holds its value.
 */
export async function verifyDomainByDns(
  db: Kysely<Database>,
  lookup: TxtLookup,
  orgId: string,
  domainInput: string,
  cause: IdentityCause,
  now: Date,
): Promise<Verification> {
  const domain = normalise(domainInput);
  const claim = await claimToVerify(db, orgId, domain, false);
  if (claim.verified_at) return { claim: claimOf(claim), changed: false };
  const record = challengeRecord(domain, claim.token);
  let found: string[];
  try {
    found = await lookup.txt(record.name);
  } catch (error) {
    if (!(error instanceof TxtLookupFailed)) throw error;
    throw error.reason === 'timeout'
      ? new DomainNotVerified(
          'dns_timeout',
          `The DNS lookup of ${record.name} timed out: ${error.message}. Nothing was changed; try again in a moment.`,
        )
      : new DomainNotVerified(
          'dns_failed',
          `The DNS lookup of ${record.name} failed: ${error.message}. Nothing was changed; try again later.`,
        );
  }
  if (found.length === 0) {
    throw new DomainNotVerified(
      'no_record',
      `No TXT record was found at ${record.name}. Create it at your DNS provider with the value shown, then press Verify again (a new record can take a few minutes to appear).`,
    );
  }
  const values = found.map((value) => value.trim().replace(/^"(.*)"$/, '$1'));
  if (!values.includes(record.value)) {
    const shown = values
      .slice(0, 3)
      .map((value) => `"${value.length > 80 ? `${value.slice(0, 80)}…` : value}"`)
      .join(', ');
    throw new DomainNotVerified(
      'wrong_value',
      `A TXT record was found at ${record.name}, but it does not hold this organisation's value ${record.value} (found ${shown}). Correct the record's value, then press Verify again.`,
    );
  }
  return { claim: await markVerified(db, orgId, claim, 'dns', cause, now, false), changed: true };
}

/** The operator's approval (`orgdata sso domains approve`): verifies a claim without DNS. */
export async function approveDomain(
  db: Kysely<Database>,
  orgId: string,
  domainInput: string,
  cause: IdentityCause,
  now: Date,
): Promise<Verification> {
  const domain = normalise(domainInput);
  if (!(await db.selectFrom('orgs').select('id').where('id', '=', orgId).executeTakeFirst())) {
    throw new NotFoundError(`There is no organisation ${orgId}.`);
  }
  const claim = await claimToVerify(db, orgId, domain, true);
  if (claim.verified_at) return { claim: claimOf(claim), changed: false };
  return { claim: await markVerified(db, orgId, claim, 'operator', cause, now, true), changed: true };
}
