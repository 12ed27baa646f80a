import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

/** A mail as the catcher received it, parsed. */
export interface CaughtMail {
  to: string;
  from: string;
  subject: string;
  text: string;
  html: string | false;
  parsed: ParsedMail;
}

export interface MailCatcher {
  /** `smtp://127.0.0.1:PORT` (no TLS, no login). */
  url: string;
  mails: CaughtMail[];
  /** The first mail to `to` (after `skip` earlier ones), waiting for it up to `ms`. */
  waitFor(to: string, options?: { skip?: number; ms?: number }): Promise<CaughtMail>;
  /** Mails received so far for `to`. */
  to(address: string): CaughtMail[];
  close(): Promise<void>;
}

/** A real SMTP server on 127.0.0.1 (a random port) that keeps every mail it is sent, parsed. */
export async function startMailCatcher(): Promise<MailCatcher> {
  const mails: CaughtMail[] = [];
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      simpleParser(stream).then(
        (parsed) => {
          const recipients = session.envelope.rcptTo.map((r) => r.address.toLowerCase());
          for (const to of recipients) {
            mails.push({
              to,
              from: parsed.from?.text ?? '',
              subject: parsed.subject ?? '',
              text: parsed.text ?? '',
              html: parsed.html ?? false,
              parsed,
            });
          }
          callback();
        },
        (error: Error) => callback(error),
      );
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as { port: number };
  const forAddress = (address: string) => mails.filter((m) => m.to === address.toLowerCase());
  return {
    url: `smtp://127.0.0.1:${port}`,
    mails,
    to: forAddress,
    async waitFor(to, { skip = 0, ms = 10_000 } = {}) {
      const until = Date.now() + ms;
      while (Date.now() < until) {
        const found = forAddress(to)[skip];
        if (found) return found;
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      throw new Error(`no mail to ${to} within ${ms} ms`);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
