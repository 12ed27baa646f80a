import type { Generated } from 'kysely';
/** Invitations and password-reset links (migration 020; see schema.ts for the conventions). */

export interface InvitationsTable {
  id: string;
  org_id: string;
  email: string;
  email_lower: string;
  /** admin or member (schema.ts's Role, spelt out: schema.ts imports this file). */
  role: 'admin' | 'member';
  /** SHA-256 (hex) of the link's token: the token itself is never stored. */
  token_hash: string;
  /** The admin who invited; null when the operator's CLI did (or that admin's account is gone). */
  invited_by: string | null;
  created_at: string;
  /** When the current token was made (a resend makes a new one). */
  sent_at: string;
  expires_at: string;
  accepted_at: string | null;
  accepted_by: string | null;
  revoked_at: string | null;
}

export interface PasswordResetsTable {
  id: string;
  user_id: string;
  /** SHA-256 (hex) of the link's token. */
  token_hash: string;
  created_at: string;
  expires_at: string;
  used_at: string | null;
}

/** A user's TOTP second factor (migration 021). */
export interface TotpFactorsTable {
  user_id: string;
  /** The base32 secret sealed with a key derived from SECRET_KEY (domain/identity/secretBox.ts). */
  secret_sealed: string;
  created_at: string;
  /** Null while set-up waits for the first code: not yet a second factor. */
  confirmed_at: string | null;
  /** The last accepted 30-second step: a code of that step or earlier is a replay. */
  last_step: number | null;
  /** 1 when set up from an SSO session (migration 022): a mailbox proof removes it. */
  added_in_sso: Generated<number>;
}

export interface RecoveryCodesTable {
  id: string;
  user_id: string;
  /**
   * argon2id (PHC string, salt of its own) of the code normalised (lower case, no dashes or spaces);
   * `sha256$scrypt$…` (scrypt of its hex SHA-256) for codes made before 025; `spent` for a used one of those.
   */
  code_hash: string;
  created_at: string;
  used_at: string | null;
  /** 1 when made from an SSO session (migration 022): a mailbox proof removes it. */
  added_in_sso: Generated<number>;
}

export interface PasskeysTable {
  id: string;
  user_id: string;
  /** The WebAuthn credential id, base64url. */
  credential_id: string;
  /** The COSE public key, base64url. */
  public_key: string;
  /** bigint: PostgreSQL hands it back as a string. Read with Number(). */
  sign_count: number | string;
  /** JSON array of AuthenticatorTransport strings. */
  transports: string;
  name: string;
  created_at: string;
  last_used_at: string | null;
  /** 1 when added from an SSO session (migration 022): a mailbox proof removes it. */
  added_in_sso: Generated<number>;
}

/** State between two requests of one sign-in or ceremony, found by the SHA-256 of the browser's token. */
export interface AuthChallengesTable {
  id_hash: string;
  /** two_factor | passkey_register | passkey_sign_in | sso | reauth … */
  purpose: string;
  user_id: string | null;
  /** JSON text: whatever the ceremony needs (challenge, nonce, PKCE verifier, next, org…). */
  data: string;
  attempts: number;
  created_at: string;
  expires_at: string;
}

export interface SsoConfigsTable {
  org_id: string;
  /** The OpenID provider's issuer URL (https). */
  issuer: string;
  client_id: string;
  /** Sealed like the TOTP secret. */
  client_secret_sealed: string;
  /** member | off */
  auto_join: string;
  /** yes | no: members sign in only through SSO (admins keep password + second factor). */
  required: string;
  created_at: string;
  updated_at: string;
}

/**
 * An organisation's claim on an e-mail domain for its SSO (migration 023). Several organisations
 * may claim one domain; a claim counts (routes /sso/start, links, auto-joins) only once verified,
 * and one organisation at most holds a domain verified.
 */
export interface SsoDomainsTable {
  org_id: string;
  /** Lower-case e-mail domain. */
  domain: string;
  /** This claim's proof: the TXT record `_orgdata-challenge.DOMAIN` holds `orgdata-verification=TOKEN`. */
  token: string;
  created_at: string;
  /** Null while unverified. */
  verified_at: string | null;
  /** dns | operator; null while unverified. */
  verified_method: string | null;
}

export interface SsoIdentitiesTable {
  issuer: string;
  subject: string;
  user_id: string;
  created_at: string;
}
