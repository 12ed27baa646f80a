import type { Config } from '../config.js';
import { inviteMember } from '../domain/identity/invitations.js';
import type { IdentityDeps } from '../domain/identity/mailer.js';
import { resetLinkFor } from '../domain/identity/passwordResets.js';
import { openMailer } from '../infra/choose.js';
import { required, type Options } from './operatorError.js';
import { withDb } from './withDb.js';

/**
 * `orgdata users invite` and `orgdata users reset-link`: the operator's way to the same links the
 * dashboard makes, printed (`--json`: `{"invite_url", "expires_at", "mailed"}`,
 * `{"reset_url", "expires_at"}`). An invitation is mailed too when SMTP_URL is set; a mail that
 * fails is a warning on standard error, the link printed all the same.
 */
async function identityDeps(config: Config, mail: boolean): Promise<IdentityDeps> {
  return {
    mailer: mail ? await openMailer(config) : null,
    publicUrl: config.publicUrl,
    inviteTtlHours: config.inviteTtlHours,
    resetTtlMinutes: config.resetTtlMinutes,
  };
}

export async function inviteCommand(config: Config, values: Options): Promise<{ json: unknown; text: string }> {
  const orgId = required(values, 'org');
  const input = { email: required(values, 'email'), role: required(values, 'role') };
  const deps = await identityDeps(config, true);
  try {
    const link = await withDb(config, (db) =>
      inviteMember({ db: db.kysely, orgId, actor: { kind: 'system' }, requestId: 'cli', now: new Date() }, deps, input, null),
    );
    if (link.mail.status === 'failed') {
      process.stderr.write(
        `orgdata: warning: the invitation is saved, but it could not be mailed (${link.mail.reason}); pass the link on yourself\n`,
      );
    }
    const mailed = link.mail.status === 'sent';
    return {
      json: { invite_url: link.url, expires_at: link.expires_at, mailed },
      text: `${link.url}\n\nInvitation of ${link.email} as ${link.role}, valid until ${link.expires_at}${mailed ? '; mailed to them' : ''}.`,
    };
  } finally {
    await deps.mailer?.close();
  }
}

export async function resetLinkCommand(config: Config, values: Options): Promise<{ json: unknown; text: string }> {
  const orgId = required(values, 'org');
  const email = required(values, 'email');
  // Printed for the operator to pass on: nothing is mailed.
  const deps = await identityDeps(config, false);
  const link = await withDb(config, (db) => resetLinkFor(db.kysely, deps, { orgId, email }, new Date()));
  return { json: link, text: `${link.reset_url}\n\nA password reset link for ${email}, valid once until ${link.expires_at}.` };
}
