import { createHash } from 'node:crypto';
import * as client from 'openid-client';
import type { IssuerPolicy, SsoProvider } from '../../domain/identity/ssoConfigs.js';
import { SsoRefused, type OpenIdClient, type SsoAuthorization, type SsoClaims } from '../../domain/identity/ssoSignIn.js';
import { ValidationError } from '../../domain/errors.js';
import { guardedFetch, OIDC_TIMEOUT_MS } from './guardedFetch.js';

/**
 * The OpenID Connect relying party, with openid-client: discovery from the issuer's
 * `/.well-known/openid-configuration`, the authorization code flow with PKCE (S256), state and
 * nonce, and the ID token checked by openid-client — issuer, audience, nonce, expiry, and (with
 * non-repudiation checks on) its signature against the provider's JWKS. Every request goes
 * through guardedFetch (the issuer guard, a deadline). Never called inside a DB transaction.
 */
export function openIdClient(policy: IssuerPolicy): OpenIdClient {
  const fetch = guardedFetch(policy);
  const cache = new ConfigurationCache();

  function configure(provider: SsoProvider): Promise<client.Configuration> {
    return cache.get(cacheKey(provider), () => discover(provider));
  }

  async function discover(provider: SsoProvider): Promise<client.Configuration> {
    try {
      const config = await client.discovery(
        new URL(provider.issuer),
        provider.clientId,
        { client_secret: provider.clientSecret },
        client.ClientSecretPost(provider.clientSecret),
        {
          [client.customFetch]: fetch as client.CustomFetch,
          timeout: OIDC_TIMEOUT_MS / 1000,
          // http:// issuers only with SSO_ALLOW_PRIVATE_ISSUERS (the guard refuses them otherwise).
          execute: policy.allowPrivate
            ? [client.allowInsecureRequests, client.enableNonRepudiationChecks]
            : [client.enableNonRepudiationChecks],
        },
      );
      return config;
    } catch (error) {
      throw unreachable(error);
    }
  }

  return {
    async begin(provider, redirectUri): Promise<SsoAuthorization> {
      const config = await configure(provider);
      const verifier = client.randomPKCECodeVerifier();
      const state = client.randomState();
      const nonce = client.randomNonce();
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: redirectUri,
        scope: 'openid email profile',
        response_type: 'code',
        state,
        nonce,
        code_challenge: await client.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      });
      return { url: url.href, state, nonce, verifier };
    },

    async finish(provider, callbackUrl, expected): Promise<SsoClaims> {
      const config = await configure(provider);
      let tokens;
      try {
        tokens = await client.authorizationCodeGrant(config, callbackUrl, {
          pkceCodeVerifier: expected.verifier,
          expectedState: expected.state,
          expectedNonce: expected.nonce,
          idTokenExpected: true,
        });
      } catch (error) {
        throw refusal(error);
      }
      const idToken = tokens.claims();
      if (!idToken) throw new SsoRefused('invalid_token', 'The sign-in provider sent no ID token.', 400);
      let email = typeof idToken.email === 'string' ? idToken.email : null;
      let verified = idToken.email_verified;
      // Claims may come from userinfo instead (many providers keep the ID token small).
      if ((email === null || verified === undefined) && tokens.access_token && config.serverMetadata().userinfo_endpoint) {
        try {
          const info = await client.fetchUserInfo(config, tokens.access_token, idToken.sub);
          email ??= typeof info.email === 'string' ? info.email : null;
          verified ??= info.email_verified;
        } catch (error) {
          throw refusal(error);
        }
      }
      return { issuer: idToken.iss, subject: idToken.sub, email, emailVerified: verified === true };
    },
  };
}

/**
 * What a provider's Configuration is cached under: the issuer, the client (its id and a digest of
 * its secret) and when the organisation's SSO configuration was saved, so a saved change (on any
 * instance: the time is in the database) is discovered afresh.
 */
function cacheKey(provider: SsoProvider): string {
  const secret = createHash('sha256').update(provider.clientSecret).digest('base64url');
  return JSON.stringify([provider.issuer, provider.clientId, secret, provider.updatedAt ?? null]);
}

/** How long a discovered Configuration serves before the issuer is asked again. */
export const DISCOVERY_TTL_MS = 60 * 60_000;
/** A failed discovery is remembered this long: a provider that is down is not asked by every request. */
export const FAILED_DISCOVERY_TTL_MS = 5_000;
const MAX_PROVIDERS = 1_000;

/**
 * Discovery and JWKS cached per provider (IDENTITY.md rule 15): one discovery request per issuer
 * and client per hour, however many sign-ins start, and requests that arrive while it is under
 * way wait for that one (bounded by its deadline). The JWKS lives in the Configuration:
 * openid-client (oauth4webapi) keeps it for 5 minutes and fetches it again for a `kid` it does
 * not know, at most once a minute. A failed discovery is kept 5 seconds, then tried again.
 */
class ConfigurationCache {
  private readonly entries = new Map<string, { value: Promise<client.Configuration>; until: number }>();

  get(key: string, discover: () => Promise<client.Configuration>): Promise<client.Configuration> {
    const now = Date.now();
    const found = this.entries.get(key);
    if (found && found.until > now) return found.value;
    this.entries.delete(key);
    const entry = { value: discover(), until: now + DISCOVERY_TTL_MS };
    entry.value.catch(() => {
      entry.until = Math.min(entry.until, Date.now() + FAILED_DISCOVERY_TTL_MS);
    });
    this.entries.set(key, entry);
    for (const old of this.entries.keys()) {
      if (this.entries.size <= MAX_PROVIDERS) break;
      this.entries.delete(old);
    }
    return entry.value;
  }
}

/** The issuer guard's refusal, however deep openid-client wrapped it (errors from customFetch become causes). */
function guardRefusal(error: unknown): ValidationError | null {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e instanceof ValidationError) return e;
  }
  return null;
}

function unreachable(error: unknown): SsoRefused {
  const refused = guardRefusal(error);
  if (refused) {
    return new SsoRefused('issuer_refused', `The sign-in provider's address is not allowed: ${refused.errors[0]?.message ?? ''}`, 502);
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new SsoRefused(
    'provider_unreachable',
    `The sign-in provider could not be reached (${detail.slice(0, 200)}). Try again later.`,
    502,
  );
}

/** A failed exchange: the provider's own error, or an answer that did not pass the checks. */
function refusal(error: unknown): SsoRefused {
  if (error instanceof client.AuthorizationResponseError) {
    return new SsoRefused('provider_error', `The sign-in provider refused: ${error.error}.`, 400);
  }
  if (error instanceof client.ResponseBodyError) {
    return new SsoRefused('provider_error', `The sign-in provider refused: ${error.error}.`, 400);
  }
  if (guardRefusal(error) || (error instanceof Error && /fetch|ECONN|timeout|abort/i.test(error.name + error.message))) {
    return unreachable(error);
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new SsoRefused('invalid_token', `The answer of the sign-in provider did not pass its checks (${detail.slice(0, 200)}).`, 400);
}
