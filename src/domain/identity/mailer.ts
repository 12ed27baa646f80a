/**
 * What invitations and password resets ask of mail: the port belongs here, with its users;
 * infra/mail holds the implementation (SMTP, with nodemailer), chosen from configuration in
 * infra/choose.ts. Without SMTP_URL there is no mailer at all (null), and links are shown instead.
 */
export interface MailMessage {
  to: string;
  subject: string;
  /** Every mail has a plain-text part; it is the whole message. */
  text: string;
}

export interface Mailer {
  /** Sends, or rejects within the implementation's deadline (it never waits without end). */
  send(message: MailMessage): Promise<void>;
  close(): Promise<void>;
}

/** What happened to a mail that was due: sent, failed (the link is still good), or none to send (no SMTP_URL). */
export type MailOutcome = { status: 'sent' } | { status: 'failed'; reason: string } | { status: 'off' };

/** What the identity rules need from configuration and infrastructure. */
export interface IdentityDeps {
  /** Null without SMTP_URL: nothing is mailed. */
  mailer: Mailer | null;
  /** PUBLIC_URL: links are `PUBLIC_URL/invite/TOKEN` and `PUBLIC_URL/reset-password/TOKEN`. */
  publicUrl: string;
  inviteTtlHours: number;
  resetTtlMinutes: number;
}

/**
 * Sends a mail that is due, after the change it tells of has committed (never inside a
 * transaction: principle 6). A failure is an outcome, not an error: what was committed stays.
 */
export async function deliver(mailer: Mailer | null, message: MailMessage): Promise<MailOutcome> {
  if (!mailer) return { status: 'off' };
  try {
    await mailer.send(message);
    return { status: 'sent' };
  } catch (error) {
    return { status: 'failed', reason: error instanceof Error ? error.message : String(error) };
  }
}
