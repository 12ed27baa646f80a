import { describe, expect, it } from 'vitest';
import { ConfigError } from '../src/config.js';
import { loadConfig } from '../src/config/load.js';

const base = { DATA_DIR: '/tmp/orgdata-config-test', SECRET_KEY: 'x'.repeat(32) };
const load = (env: Record<string, string>) => loadConfig({ ...base, ...env });

/** SMTP_URL, MAIL_FROM, INVITE_TTL_HOURS and RESET_TTL_MINUTES as the server reads them at start. */
describe('mail and link settings', () => {
  it('defaults: no mail, From no-reply at the PUBLIC_URL host, 168 hours, 60 minutes', () => {
    const config = load({ PUBLIC_URL: 'https://crm.example.org' });
    expect(config.smtpUrl).toBeNull();
    expect(config.mailFrom).toBe('orgdata <no-reply@crm.example.org>');
    expect(config.inviteTtlHours).toBe(168);
    expect(config.resetTtlMinutes).toBe(60);
    expect(load({}).mailFrom).toBe('orgdata <no-reply@localhost>');
  });

  it('takes smtp:// and smtps:// URLs with a login, and refuses others', () => {
    expect(load({ SMTP_URL: 'smtps://user:p%40ss@mail.example.org:465' }).smtpUrl).toBe('smtps://user:p%40ss@mail.example.org:465');
    expect(load({ SMTP_URL: 'smtp://127.0.0.1:2525' }).smtpUrl).toBe('smtp://127.0.0.1:2525');
    expect(() => load({ SMTP_URL: 'http://mail.example.org' })).toThrow(ConfigError);
    expect(() => load({ SMTP_URL: 'not a url' })).toThrow(/SMTP_URL/);
  });

  it('takes MAIL_FROM as an address or Name <address>, on one line', () => {
    expect(load({ MAIL_FROM: 'Acme CRM <crm@acme.example>' }).mailFrom).toBe('Acme CRM <crm@acme.example>');
    expect(load({ MAIL_FROM: 'crm@acme.example' }).mailFrom).toBe('crm@acme.example');
    expect(() => load({ MAIL_FROM: 'Acme CRM' })).toThrow(/MAIL_FROM/);
    expect(() => load({ MAIL_FROM: 'a@b.example\r\nBcc: victim@example.com' })).toThrow(/MAIL_FROM/);
  });

  it('bounds the links’ lifetimes', () => {
    expect(load({ INVITE_TTL_HOURS: '24', RESET_TTL_MINUTES: '15' })).toMatchObject({ inviteTtlHours: 24, resetTtlMinutes: 15 });
    expect(() => load({ INVITE_TTL_HOURS: '0' })).toThrow(/INVITE_TTL_HOURS/);
    expect(() => load({ RESET_TTL_MINUTES: '100000' })).toThrow(/RESET_TTL_MINUTES/);
  });
});
