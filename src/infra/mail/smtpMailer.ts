import nodemailer, { type Transporter } from 'nodemailer';
import type { Mailer, MailMessage } from '../../domain/identity/mailer.js';
import { withDeadline } from '../deadline.js';

/**
 * Mail over SMTP (SMTP_URL: `smtp://` with STARTTLS when the server offers it, or `smtps://`;
 * `user:pass@` when the server wants a login), with nodemailer. Every step has a time limit
 * (connecting, the server's greeting, silence on the socket), and the whole send a deadline on
 * top: a mail server that hangs delays an answer by at most SEND_DEADLINE_MS, never without end.
 * One connection per mail: mail is rare here (an invitation, a reset), a pool would hold
 * connections open for nothing.
 */
export const SEND_DEADLINE_MS = 15_000;

export class SmtpMailer implements Mailer {
  private readonly transport: Transporter;

  constructor(
    smtpUrl: string,
    private readonly from: string,
  ) {
    this.transport = nodemailer.createTransport({
      url: smtpUrl,
      connectionTimeout: 5_000,
      greetingTimeout: 5_000,
      socketTimeout: 10_000,
      dnsTimeout: 5_000,
    });
  }

  async send(message: MailMessage): Promise<void> {
    await withDeadline(
      this.transport.sendMail({ from: this.from, to: message.to, subject: message.subject, text: message.text }),
      SEND_DEADLINE_MS,
      'the mail server',
    );
  }

  close(): Promise<void> {
    this.transport.close();
    return Promise.resolve();
  }
}
