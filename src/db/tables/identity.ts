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
