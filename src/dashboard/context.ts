import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { Ctx } from '../domain/context.js';
import { ForbiddenError, UnauthorizedError } from '../domain/errors.js';
import { describeOrigin, type KeyAdmin } from '../domain/apiKeys/apiKeys.js';
import { browserName } from '../web/browserName.js';
import { findSession, signOut, type SessionView } from '../domain/sessions/sessions.js';
import { ensureSandbox, type Mode } from '../domain/orgs/sandbox.js';

export const SESSION_COOKIE = 'od_session';
const FLASH_COOKIE = 'od_flash';

declare module 'fastify' {
  interface FastifyRequest {
    session?: SessionView;
    sessionToken?: string;
    /** Whose data this page shows (set for every signed-in page by its group in plugin.ts). */
    shown?: Shown;
  }
}

/**
 * The organisation a page shows: its data and Developer pages show the session's mode (the
 * sandbox in test mode), its settings pages the live organisation (people and settings are
 * shared, SANDBOX.md). Decided once per page group in plugin.ts: a page asks ctxOf / shownOf and
 * never reads the session's organisation for its data.
 */
export interface Shown {
  /** The org_id the page's data queries use: the live organisation's, or its sandbox's. */
  orgId: string;
  /** The live organisation (memberships, roles, settings, API key admins). */
  liveOrgId: string;
  mode: Mode;
}

/** preHandler of the data and Developer pages: they show the session's mode. */
export function showsTheMode(db: Kysely<Database>) {
  return async function preHandler(request: FastifyRequest): Promise<void> {
    const session = request.session;
    if (!session) return;
    if (!session.testMode) {
      request.shown = { orgId: session.orgId, liveOrgId: session.orgId, mode: 'live' };
      return;
    }
    // Read with the session from its live organisation each time (never stored: no stale id).
    const sandbox = session.sandboxOrgId ?? (await ensureSandbox(db, session.orgId));
    request.shown = { orgId: sandbox, liveOrgId: session.orgId, mode: 'test' };
  };
}

/** preHandler of the settings pages (members, security, SSO, account, re-authentication): always live. */
export async function showsLive(request: FastifyRequest): Promise<void> {
  const session = request.session;
  if (session) request.shown = { orgId: session.orgId, liveOrgId: session.orgId, mode: 'live' };
}

/** Whose data this page shows; a page registered outside plugin.ts's groups fails rather than guess. */
export function shownOf(request: FastifyRequest): Shown {
  if (!request.session) throw new UnauthorizedError('Sign in first.');
  if (!request.shown)
    throw new Error(`${request.routeOptions.url ?? request.url} is in no page group (plugin.ts): it cannot tell live from test.`);
  return request.shown;
}

/**
 * Where to come back to after signing in: the page asked for, or, for a form sent without a
 * session (it ended: idle, expired, signed out elsewhere), the page the form was on when the
 * Referer is this site's. The sign-in page checks it again (safeNext).
 */
function comeBackTo(request: FastifyRequest): string | null {
  if (request.method === 'GET' || request.method === 'HEAD') return request.url;
  try {
    const referer = new URL(request.headers.referer ?? '');
    return referer.host === request.headers.host ? referer.pathname + referer.search : null;
  } catch {
    return null;
  }
}

/**
 * The signed-in person, or a redirect to the sign-in page (`next` kept). API keys never open the
 * dashboard. `idleMinutes`: SESSION_IDLE_MINUTES.
 */
export function requireSession(db: Kysely<Database>, idleMinutes?: number) {
  return async function preHandler(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const token = request.cookies[SESSION_COOKIE];
    const session = token ? await findSession(db, token, new Date(), originOf(request), idleMinutes) : null;
    if (!session || !token) {
      if (request.headers.authorization) {
        throw new UnauthorizedError('The dashboard is for people: sign in with your email and password. API keys only work on /api/v1.');
      }
      const back = comeBackTo(request);
      return reply.redirect(back ? `/login?next=${encodeURIComponent(back)}` : '/login', 303);
    }
    request.session = session;
    request.sessionToken = token;
    return undefined;
  };
}

/**
 * Hands the browser a new session's cookie, ending the one it came with (if any): a sign-in, an
 * accepted invitation or a password change always gets a fresh session token (rotation).
 */
export async function startSession(
  request: FastifyRequest,
  reply: FastifyReply,
  db: Kysely<Database>,
  session: { token: string; expiresAt: Date },
  secure: boolean,
): Promise<void> {
  const previous = request.cookies[SESSION_COOKIE];
  if (previous && previous !== session.token) await signOut(db, previous);
  reply.setCookie(SESSION_COOKIE, session.token, { path: '/', httpOnly: true, sameSite: 'lax', secure, expires: session.expiresAt });
}

/** Approximate origin of a request, as Activity shows it: the /24 or /48 and the browser's product name. */
/** Where a dashboard request comes from: its network, browser and system (IDENTITY.md rule 19). */
export function originOf(request: FastifyRequest): string {
  const userAgent = request.headers['user-agent'];
  return describeOrigin(request.ip, userAgent, browserName(userAgent));
}

/** Every form POST carries the session's CSRF token; a request from another site cannot. */
export function checkCsrf(request: FastifyRequest, given: unknown): void {
  const expected = request.session?.csrfToken ?? '';
  const a = Buffer.from(typeof given === 'string' ? given : '');
  const b = Buffer.from(expected);
  if (a.length === 0 || a.length !== b.length || !timingSafeEqual(a, b)) {
    throw new ForbiddenError('This form has expired or did not come from this site. Go back, reload the page and try again.');
  }
}

export function requireAdmin(request: FastifyRequest): void {
  if (request.session?.role !== 'admin') throw new ForbiddenError('Only admins of this organisation can open this page.');
}

/** requireAdmin as a preHandler: put before requireRecentAuthentication, so a member is refused, never asked for a password. */
export async function adminOnly(request: FastifyRequest): Promise<void> {
  requireAdmin(request);
}

export function ctxOf(request: FastifyRequest, db: Kysely<Database>): Ctx {
  const session = request.session;
  if (!session) throw new UnauthorizedError('Sign in first.');
  return {
    db,
    orgId: shownOf(request).orgId,
    actor: { kind: 'user', userId: session.userId, role: session.role },
    requestId: request.id,
    now: new Date(),
  };
}

/**
 * Who manages the API keys this page shows: an admin of the live organisation (keys of both modes
 * are managed there), and the mode whose keys the page lists, makes and revokes.
 */
export function keyAdminOf(request: FastifyRequest, db: Kysely<Database>): { admin: KeyAdmin; mode: Mode } {
  const session = request.session;
  if (!session) throw new UnauthorizedError('Sign in first.');
  const shown = shownOf(request);
  return { admin: { db, orgId: shown.liveOrgId, userId: session.userId, now: new Date() }, mode: shown.mode };
}

/** keyAdminOf's answer as listApiKeys's arguments. */
export function keyListArgs(request: FastifyRequest, db: Kysely<Database>): [KeyAdmin, Mode] {
  const { admin, mode } = keyAdminOf(request, db);
  return [admin, mode];
}

/** A one-time message shown on the next page (after a redirect). */
export function flash(reply: FastifyReply, message: string): void {
  reply.setCookie(FLASH_COOKIE, Array.from(message).slice(0, 300).join(''), { path: '/', httpOnly: true, sameSite: 'lax', maxAge: 60 });
}

export function takeFlash(request: FastifyRequest, reply: FastifyReply): string | null {
  const message = request.cookies[FLASH_COOKIE];
  if (!message) return null;
  reply.clearCookie(FLASH_COOKIE, { path: '/' });
  return message;
}

/** Form fields arrive as strings (or arrays when repeated); anything else is treated as empty. */
export function text(body: unknown, name: string): string {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  if (Array.isArray(value)) return typeof value[0] === 'string' ? value[0] : '';
  return typeof value === 'string' ? value : '';
}

export function list(body: unknown, name: string): string[] {
  const value = (body as Record<string, unknown> | undefined)?.[name];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === 'string');
  return typeof value === 'string' && value !== '' ? [value] : [];
}
