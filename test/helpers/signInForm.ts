import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { formBody } from './browserSession.js';

/**
 * The sign-in form as a browser uses it (IDENTITY.md rule 18): GET /login first, which sets the
 * form guard's cookie (`od_form`) and puts its token in the page (`_csrf`), then POST /login with
 * both. Every test and bench script that signs in with a password goes through here.
 */
export const csrfIn = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1];

/** `name=value` of each cookie a response sets (not the ones it clears). */
function setCookies(lines: string[]): string[] {
  return lines.map((line) => line.split(';')[0]!.trim()).filter((pair) => !pair.endsWith('='));
}

const joined = (...parts: (string | undefined)[]) => parts.filter((part) => part).join('; ');

export interface SignInForm {
  /** The `cookie` header value that carries the form's cookie (joined with any given). */
  cookie: string;
  csrf: string;
}

/** The sign-in form's token and cookie through app.inject. */
export async function signInFormOf(
  app: FastifyInstance,
  options: { remoteAddress?: string; headers?: Record<string, string> } = {},
): Promise<SignInForm> {
  const page = await app.inject({ method: 'GET', url: '/login', remoteAddress: options.remoteAddress, headers: options.headers });
  const csrf = csrfIn(page.body);
  if (!csrf) throw new Error(`GET /login answered ${page.statusCode} without a form token`);
  const set = setCookies((page.cookies as { name: string; value: string }[]).map((c) => `${c.name}=${c.value}`));
  return { cookie: joined(options.headers?.cookie, ...set), csrf };
}

/** POST /login through app.inject as a browser that has just loaded the form. */
export async function postSignIn(
  app: FastifyInstance,
  fields: Record<string, string>,
  options: { remoteAddress?: string; headers?: Record<string, string> } = {},
): Promise<LightMyRequestResponse> {
  const form = await signInFormOf(app, options);
  const request: InjectOptions = {
    method: 'POST',
    url: '/login',
    remoteAddress: options.remoteAddress,
    headers: { ...options.headers, cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' },
    payload: formBody({ _csrf: form.csrf, ...fields }),
  };
  return app.inject(request);
}

/** The sign-in form's token and cookie from a running server (over HTTP). */
export async function fetchSignInForm(base: string, headers: Record<string, string> = {}, signal?: AbortSignal): Promise<SignInForm> {
  const page = await fetch(`${base}/login`, { headers, signal });
  const csrf = csrfIn(await page.text());
  if (!csrf) throw new Error(`GET ${base}/login answered ${page.status} without a form token`);
  return { cookie: joined(headers.cookie, ...setCookies(page.headers.getSetCookie())), csrf };
}

/**
 * POST /login to a running server as a browser that has just loaded the form; redirects are not
 * followed (the answer is the 303 with its session cookie, or the page of a refusal).
 */
export async function fetchSignIn(
  base: string,
  fields: Record<string, string>,
  init: { headers?: Record<string, string>; signal?: AbortSignal } = {},
): Promise<Response> {
  const headers = init.headers ?? {};
  const form = await fetchSignInForm(base, headers, init.signal);
  return fetch(`${base}/login`, {
    method: 'POST',
    redirect: 'manual',
    signal: init.signal,
    headers: { ...headers, cookie: form.cookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _csrf: form.csrf, ...fields }).toString(),
  });
}

/** The session cookie (`od_session=…`) a successful sign-in set. */
export const sessionCookieFrom = (response: Response) =>
  response.headers
    .getSetCookie()
    .map((line) => line.split(';')[0]!)
    .find((pair) => pair.startsWith('od_session=') && pair !== 'od_session=');
