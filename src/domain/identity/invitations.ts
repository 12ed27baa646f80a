import type { Kysely } from 'kysely';
import type { Database, Role } from '../../db/schema.js';
import { lockOrg } from '../../db/transaction.js';
import type { Ctx } from '../context.js';
import { ForbiddenError, NotFoundError, ValidationError, type FieldError } from '../errors.js';
import { recordMemberEvent, type IdentityCause, type MemberEventType } from '../events/memberEvents.js';
import { newId, nowIso } from '../ids.js';
import { checkEmail } from '../validation.js';
import { deliver, type IdentityDeps, type MailOutcome } from './mailer.js';
import { invitationMail } from './messages.js';
import { later, newLinkToken } from './secretLinks.js';

/**
 * Invitations (Settings → Members, and `orgdata users invite`): an admin names an email and a
 * role; the person receives a link, chooses their own password (or signs in with the one they
 * have) and joins. The link is made, stored as a hash and committed before any mail is sent; a
 * mail that fails loses nothing: the admin is shown the link, and may resend.
 */

export interface InvitationView {
  id: string;
  email: string;
  role: Role;
  /** The inviting admin's email; null when the operator's CLI invited. */
  invited_by: string | null;
  created_at: string;
  /** When the current link was made (a resend makes a new one). */
  sent_at: string;
  expires_at: string;
  expired: boolean;
}

/** A new link: shown to whoever made it when it could not be mailed (or no mail is configured). */
export interface InvitationLink {
  id: string;
  email: string;
  role: Role;
  url: string;
  expires_at: string;
  mail: MailOutcome;
}

/** Admins invite (a member cannot), and the operator's CLI does (actor `system`). */
function checkInviter(ctx: Ctx): void {
  const admin = ctx.actor.kind === 'user' && ctx.actor.role === 'admin';
  if (!admin && ctx.actor.kind !== 'system') throw new ForbiddenError('Only an admin of the organisation can invite people.');
}

export function causeOfCtx(ctx: Ctx, origin: string | null): IdentityCause {
  return ctx.actor.kind === 'user'
    ? { actor_type: 'user', actor_id: ctx.actor.userId, request_id: ctx.requestId, origin }
    : { actor_type: 'system', actor_id: null, request_id: null, origin: null };
}

const linkOf = (deps: IdentityDeps, token: string) => `${deps.publicUrl}/invite/${token}`;

async function inviterEmail(db: Kysely<Database>, ctx: Ctx): Promise<string | null> {
  if (ctx.actor.kind !== 'user') return null;
  const row = await db.selectFrom('users').select('email').where('id', '=', ctx.actor.userId).executeTakeFirst();
  return row?.email ?? null;
}

async function orgName(db: Kysely<Database>, orgId: string): Promise<string> {
  const org = await db.selectFrom('orgs').select('name').where('id', '=', orgId).executeTakeFirst();
  if (!org) throw new NotFoundError(`No organisation ${orgId}.`);
  return org.name;
}

/** Mails a committed invitation's link (never inside the transaction that made it). */
async function mailLink(ctx: Ctx, deps: IdentityDeps, link: Omit<InvitationLink, 'mail'>): Promise<InvitationLink> {
  if (!deps.mailer) return { ...link, mail: { status: 'off' } };
  const [name, invitedBy] = await Promise.all([orgName(ctx.db, ctx.orgId), inviterEmail(ctx.db, ctx)]);
  const mail = await deliver(
    deps.mailer,
    invitationMail({ to: link.email, orgName: name, role: link.role, invitedBy, url: link.url, ttlHours: deps.inviteTtlHours }),
  );
  return { ...link, mail };
}

export async function inviteMember(
  ctx: Ctx,
  deps: IdentityDeps,
  input: { email: string; role: string },
  origin: string | null,
): Promise<InvitationLink> {
  checkInviter(ctx);
  const email = input.email.trim();
  const errors: FieldError[] = [];
  checkEmail('email', email, errors);
  if (input.role !== 'admin' && input.role !== 'member') errors.push({ field: 'role', message: 'must be admin or member' });
  if (errors.length > 0) throw new ValidationError(errors);
  const role = input.role as Role;
  const { token, hash } = newLinkToken();
  const now = ctx.now;
  const made = await ctx.db.transaction().execute(async (trx) => {
    // One open invitation per email and organisation, also under concurrent invitations.
    await lockOrg(trx, ctx.orgId);
    await orgName(trx, ctx.orgId);
    const member = await trx
      .selectFrom('memberships')
      .innerJoin('users', 'users.id', 'memberships.user_id')
      .select('users.id')
      .where('memberships.org_id', '=', ctx.orgId)
      .where('users.email_lower', '=', email.toLowerCase())
      .executeTakeFirst();
    if (member) throw ValidationError.field('email', 'is already a member of this organisation');
    const open = await trx
      .selectFrom('invitations')
      .select(['id', 'expires_at'])
      .where('org_id', '=', ctx.orgId)
      .where('email_lower', '=', email.toLowerCase())
      .where('accepted_at', 'is', null)
      .where('revoked_at', 'is', null)
      .execute();
    if (open.some((i) => i.expires_at > nowIso(now))) {
      throw ValidationError.field('email', 'has a pending invitation already: resend it from the list of pending invitations');
    }
    // An expired one is replaced (it could no longer be accepted anyway).
    if (open.length > 0) {
      await trx
        .updateTable('invitations')
        .set({ revoked_at: nowIso(now) })
        .where(
          'id',
          'in',
          open.map((i) => i.id),
        )
        .execute();
    }
    const row = {
      id: newId('inv'),
      org_id: ctx.orgId,
      email,
      email_lower: email.toLowerCase(),
      role,
      token_hash: hash,
      invited_by: ctx.actor.kind === 'user' ? ctx.actor.userId : null,
      created_at: nowIso(now),
      sent_at: nowIso(now),
      expires_at: later(now, deps.inviteTtlHours * 3_600_000),
      accepted_at: null,
      accepted_by: null,
      revoked_at: null,
    };
    await trx.insertInto('invitations').values(row).execute();
    await recordMemberEvent(
      trx,
      [ctx.orgId],
      'member.invited',
      { object: 'member', id: row.id, email, role },
      causeOfCtx(ctx, origin),
      now,
    );
    return row;
  });
  return mailLink(ctx, deps, { id: made.id, email, role, url: linkOf(deps, token), expires_at: made.expires_at });
}

/** The organisation's open invitation `id` (not accepted, not revoked; perhaps expired), in `trx`. */
async function openInvitation(trx: Kysely<Database>, ctx: Ctx, id: string) {
  const row = await trx
    .selectFrom('invitations')
    .select(['id', 'email', 'role'])
    .where('org_id', '=', ctx.orgId)
    .where('id', '=', id)
    .where('accepted_at', 'is', null)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (!row) throw new NotFoundError('That invitation is no longer pending: it was accepted or revoked.');
  return row;
}

async function change(ctx: Ctx, id: string, type: MemberEventType, origin: string | null, set: Partial<Database['invitations']>) {
  return ctx.db.transaction().execute(async (trx) => {
    await lockOrg(trx, ctx.orgId);
    const row = await openInvitation(trx, ctx, id);
    await trx.updateTable('invitations').set(set).where('id', '=', row.id).execute();
    const object = { object: 'member' as const, id: row.id, email: row.email, role: row.role };
    await recordMemberEvent(trx, [ctx.orgId], type, object, causeOfCtx(ctx, origin), ctx.now);
    return row;
  });
}

/** A new link for an open invitation, valid INVITE_TTL_HOURS from now; the old link stops working. */
export async function resendInvitation(ctx: Ctx, deps: IdentityDeps, id: string, origin: string | null): Promise<InvitationLink> {
  checkInviter(ctx);
  const { token, hash } = newLinkToken();
  const expiresAt = later(ctx.now, deps.inviteTtlHours * 3_600_000);
  const row = await change(ctx, id, 'member.invitation_resent', origin, {
    token_hash: hash,
    sent_at: nowIso(ctx.now),
    expires_at: expiresAt,
  });
  return mailLink(ctx, deps, { id: row.id, email: row.email, role: row.role, url: linkOf(deps, token), expires_at: expiresAt });
}

export async function revokeInvitation(ctx: Ctx, id: string, origin: string | null): Promise<{ email: string }> {
  checkInviter(ctx);
  const row = await change(ctx, id, 'member.invitation_revoked', origin, { revoked_at: nowIso(ctx.now) });
  return { email: row.email };
}

/** Open invitations, newest first, the expired ones too (they can be resent). */
export async function listInvitations(ctx: Ctx): Promise<InvitationView[]> {
  checkInviter(ctx);
  const rows = await ctx.db
    .selectFrom('invitations')
    .leftJoin('users', 'users.id', 'invitations.invited_by')
    .select([
      'invitations.id',
      'invitations.email',
      'invitations.role',
      'users.email as invited_by',
      'invitations.created_at',
      'invitations.sent_at',
      'invitations.expires_at',
    ])
    .where('invitations.org_id', '=', ctx.orgId)
    .where('invitations.accepted_at', 'is', null)
    .where('invitations.revoked_at', 'is', null)
    .orderBy('invitations.created_at', 'desc')
    .orderBy('invitations.id', 'desc')
    .execute();
  const now = nowIso(ctx.now);
  return rows.map((r) => ({ ...r, invited_by: r.invited_by ?? null, expired: r.expires_at <= now }));
}
