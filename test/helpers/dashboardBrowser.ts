import { CookieJar } from './oidcProvider.js';
import { passwordSignIn } from './ssoServer.js';

/** The CSRF token of the first form of a page (a signed-in page's is the session's). */
export const csrfOf = (body: string) => /name="_csrf" value="([^"]+)"/.exec(body)?.[1] ?? '';

/**
 * A browser on a real server process over HTTP: keeps its cookies as they rotate, and submits a
 * form as a person does, from the page that holds it (that page's CSRF token, and the page as
 * Referer).
 */
export class DashboardBrowser {
  constructor(
    readonly base: string,
    readonly jar = new CookieJar(),
  ) {}

  /** Signs in with the password form; throws when the server does not let the person in. */
  static async signIn(base: string, email: string, password = 'correct horse battery'): Promise<DashboardBrowser> {
    const browser = new DashboardBrowser(base);
    const { response } = await passwordSignIn(base, email, password, browser.jar);
    if (response.status !== 303 || !browser.cookie('od_session')) throw new Error(`sign-in of ${email} answered ${response.status}`);
    return browser;
  }

  cookie(name: string): string | undefined {
    return new Map(
      this.jar
        .header(this.base)
        .split('; ')
        .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)] as const),
    ).get(name);
  }

  get(path: string): Promise<Response> {
    return this.jar.fetch(`${this.base}${path}`);
  }

  /** Opens `from`, then submits `fields` to `action` with the page's CSRF token and `from` as Referer. */
  async submit(from: string, action: string, fields: Record<string, string> = {}): Promise<Response> {
    const page = await this.get(from);
    const body = await page.text();
    if (page.status !== 200) throw new Error(`${from} answered ${page.status}: ${body.slice(0, 300)}`);
    return this.jar.fetch(`${this.base}${action}`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', referer: `${this.base}${from}` },
      body: new URLSearchParams({ _csrf: csrfOf(body), ...fields }).toString(),
    });
  }
}
