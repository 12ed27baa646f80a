import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider from 'oidc-provider';

/** A person the provider knows: the claims it vouches for (mutable: an email can change at the IdP). */
export interface IdpAccount {
  email: string;
  email_verified: boolean;
}

export interface TestProvider {
  /** `http://localhost:PORT` (SSO_ALLOW_PRIVATE_ISSUERS lets orgdata use it). */
  issuer: string;
  clientId: string;
  clientSecret: string;
  accounts: Map<string, IdpAccount>;
  /** Requests the provider has answered, by path (`/.well-known/openid-configuration`, `/jwks`, …). */
  hits: Map<string, number>;
  close(): Promise<void>;
}

/**
 * A real OpenID provider (oidc-provider, certified) on localhost in the test process: one
 * confidential client whose redirect URI is orgdata's `/sso/callback`, PKCE required, the
 * development login and consent pages (any login name is the account id; `accounts` gives its
 * claims). Email claims are served by userinfo (oidc-provider keeps scope claims out of the ID
 * token when an access token is issued), so orgdata's userinfo path is exercised too.
 */
export async function startProvider(redirectUri: string): Promise<TestProvider> {
  const accounts = new Map<string, IdpAccount>();
  const server: Server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const issuer = `http://localhost:${port}`;
  const clientId = 'orgdata-test';
  const clientSecret = 'a-client-secret-of-the-test-provider-0123456789';
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: clientId,
        client_secret: clientSecret,
        redirect_uris: [redirectUri],
        grant_types: ['authorization_code'],
        response_types: ['code'],
        token_endpoint_auth_method: 'client_secret_post',
      },
    ],
    claims: { openid: ['sub'], email: ['email', 'email_verified'] },
    pkce: { required: () => true },
    cookies: { keys: ['test-cookie-key-0123456789abcdef'] },
    features: { devInteractions: { enabled: true } },
    findAccount: (_ctx: unknown, id: string) => {
      const account = accounts.get(id);
      if (!account) return undefined;
      return { accountId: id, claims: async () => ({ sub: id, ...account }) };
    },
  });
  const hits = new Map<string, number>();
  server.on('request', (request: { url?: string }) => {
    const path = new URL(request.url ?? '/', issuer).pathname;
    hits.set(path, (hits.get(path) ?? 0) + 1);
  });
  server.on('request', provider.callback());
  return {
    issuer,
    clientId,
    clientSecret,
    accounts,
    hits,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** A browser's cookies, per host (enough for two local servers on different ports). */
export class CookieJar {
  private readonly cookies = new Map<string, Map<string, string>>();
  header(url: string): string {
    const jar = this.cookies.get(new URL(url).host);
    return jar ? [...jar].map(([k, v]) => `${k}=${v}`).join('; ') : '';
  }
  take(url: string, response: Response): void {
    const host = new URL(url).host;
    const jar = this.cookies.get(host) ?? new Map<string, string>();
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attributes] = line.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq).trim();
      const value = pair!.slice(eq + 1).trim();
      const expired = attributes.some((a) => /max-age=0|expires=Thu, 01 Jan 1970/i.test(a.trim()));
      if (expired || value === '') jar.delete(name);
      else jar.set(name, value);
    }
    this.cookies.set(host, jar);
  }
  async fetch(url: string, init: RequestInit = {}): Promise<Response> {
    const headers = new Headers(init.headers);
    const cookie = this.header(url);
    if (cookie) headers.set('cookie', cookie);
    const response = await fetch(url, { ...init, headers, redirect: 'manual' });
    this.take(url, response);
    return response;
  }
}

/**
 * Drives the provider's login and consent pages as a person would (logging in as `login`) from
 * the authorization URL until the provider redirects back to `back` (orgdata): returns that URL,
 * the callback with its code and state, not yet visited.
 */
export async function authorizeAt(jar: CookieJar, authorizationUrl: string, login: string, back: string): Promise<string> {
  let url = authorizationUrl;
  for (let step = 0; step < 12; step++) {
    if (url.startsWith(back)) return url;
    const response = await jar.fetch(url);
    if (response.status >= 300 && response.status < 400) {
      url = new URL(response.headers.get('location')!, url).href;
      continue;
    }
    const body = await response.text();
    const prompt = /name="prompt" value="(\w+)"/.exec(body)?.[1];
    const action = /<form[^>]*action="([^"]+)"/.exec(body)?.[1];
    if (response.status !== 200 || !prompt || !action)
      throw new Error(`unexpected provider page ${response.status} at ${url}: ${body.slice(0, 300)}`);
    const fields = new URLSearchParams({ prompt, ...(prompt === 'login' ? { login, password: 'any' } : {}) });
    const posted = await jar.fetch(new URL(action, url).href, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: fields.toString(),
    });
    if (posted.status < 300 || posted.status >= 400) throw new Error(`provider refused the ${prompt} step: ${posted.status}`);
    url = new URL(posted.headers.get('location')!, url).href;
  }
  throw new Error('the provider did not send the browser back');
}
