import type { MailMessage } from './mailer.js';

/**
 * The mails people receive, in plain text only: each names the organisation, says who asked and
 * how long the link works, and says what to do if it was not expected.
 */

function hoursText(hours: number): string {
  if (hours % 24 === 0) return `${hours / 24} day${hours === 24 ? '' : 's'}`;
  return `${hours} hour${hours === 1 ? '' : 's'}`;
}

function minutesText(minutes: number): string {
  if (minutes % 60 === 0) return `${minutes / 60} hour${minutes === 60 ? '' : 's'}`;
  return `${minutes} minute${minutes === 1 ? '' : 's'}`;
}

export function invitationMail(input: {
  to: string;
  orgName: string;
  role: string;
  invitedBy: string | null;
  url: string;
  ttlHours: number;
}): MailMessage {
  const who = input.invitedBy ?? 'The operator of this orgdata';
  const role = input.role === 'admin' ? 'an admin' : 'a member';
  return {
    to: input.to,
    subject: `You are invited to ${input.orgName} on orgdata`,
    text: [
      `${who} invited you to join ${input.orgName} on orgdata as ${role}.`,
      '',
      'To accept, open this link and choose your password (or sign in, if you already have an orgdata account):',
      '',
      input.url,
      '',
      `The link works once, for ${hoursText(input.ttlHours)}. If it has expired, ask ${input.invitedBy ?? 'an admin of ' + input.orgName} to send a new invitation.`,
      '',
      'If you did not expect this invitation, ignore this email: nothing happens unless the link is opened and accepted.',
      '',
    ].join('\n'),
  };
}

export function passwordResetMail(input: { to: string; orgNames: string[]; url: string; ttlMinutes: number }): MailMessage {
  const orgs = input.orgNames.length > 0 ? input.orgNames.join(', ') : 'your organisation';
  return {
    to: input.to,
    subject: 'Reset your orgdata password',
    text: [
      `Someone asked to reset the password of your orgdata account (${input.to}), which you use for ${orgs}.`,
      '',
      'To choose a new password, open this link:',
      '',
      input.url,
      '',
      `The link works once, for ${minutesText(input.ttlMinutes)}. Setting a new password signs you out everywhere.`,
      '',
      'If you did not ask for this, ignore this email: your password stays as it is.',
      '',
    ].join('\n'),
  };
}
