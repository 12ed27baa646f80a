import { generateSync } from 'otplib';
import { expect } from 'vitest';
import { followRotation, type DashboardUser } from './browserSession.js';

/** What an authenticator app would show `steps` 30-second steps from now, computed by otplib. */
export function totpCode(secret: string, steps = 0): string {
  return generateSync({ secret, epoch: Math.floor(Date.now() / 1000) + steps * 30 });
}

const unescape = (text: string) => text.replace(/&#(\d+);/g, (_, n: string) => String.fromCharCode(Number(n)));

/** The otpauth URI the set-up page shows as text, and the secret read from it (as a person scanning it would). */
export function setupOf(body: string): { uri: string; secret: string } {
  const uri = unescape(/<code id="totp-uri"[^>]*>([^<]+)<\/code>/.exec(body)?.[1] ?? '');
  const secret = new URL(uri).searchParams.get('secret') ?? '';
  return { uri, secret };
}

export const recoveryCodesIn = (body: string) => [...body.matchAll(/<li><code>([a-z0-9]{5}-[a-z0-9]{5})<\/code><\/li>/g)].map((m) => m[1]!);

/**
 * Turns two-factor on for a signed-in person through the pages: Set up, read the secret from the
 * page, confirm with a code of the previous step (so the next two steps stay free for the test).
 * `user` then holds the rotated session.
 */
export async function enrol(user: DashboardUser): Promise<{ secret: string; codes: string[] }> {
  const started = await user.post('/settings/account/two-factor/setup');
  expect(started.statusCode, started.body).toBe(303);
  const { secret } = setupOf((await user.get('/settings/account/two-factor')).body);
  expect(secret).toMatch(/^[A-Z2-7]{32}$/);
  // A code of the previous step is accepted only within 30 s of that step's end (RFC 6238's one
  // step of drift): near the end of a step, a slow machine could reach the server past it. Wait
  // for the next step then, so the code is at least 5 s inside the window.
  const intoStep = (Date.now() / 1000) % 30;
  if (intoStep > 25) await new Promise((resolve) => setTimeout(resolve, (30 - intoStep) * 1000 + 100));
  const confirmed = await user.post('/settings/account/two-factor/confirm', { code: totpCode(secret, -1) });
  expect(confirmed.statusCode, confirmed.body).toBe(200);
  // Turning two-factor on rotates the session (IDENTITY.md rule 13): the browser goes on with the new one.
  expect(followRotation(user, confirmed)).toBe(true);
  const codes = recoveryCodesIn(confirmed.body);
  expect(codes).toHaveLength(10);
  return { secret, codes };
}
