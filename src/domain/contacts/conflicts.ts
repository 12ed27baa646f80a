import type { Kysely } from 'kysely';
import { isUniqueViolation } from '../../db/errors.js';
import { PreparedQuery } from '../../db/preparedQuery.js';
import type { Database } from '../../db/schema.js';
import { ConflictError } from '../errors.js';

/**
 * A contact's email and external id are unique in its organisation: the conflict a write meets
 * with another contact, found before the write or after the database refused it.
 */

export function duplicateEmail(email: string, existingId: string | null): ConflictError {
  return new ConflictError('contact_exists', `A contact with the email ${email} already exists in this organisation.`, {
    existing_id: existingId,
  });
}

export function duplicateExternalId(existingId: string | null): ConflictError {
  return new ConflictError('external_id_exists', 'A contact with this external_id already exists in this organisation.', {
    existing_id: existingId,
  });
}

/** Whether a unique violation is the external id's (contacts_external_id) rather than the email's. */
function onExternalId(error: unknown): boolean {
  const { constraint, message } = error as { constraint?: unknown; message?: unknown };
  return constraint === 'contacts_external_id' || (typeof message === 'string' && message.includes('contacts.external_id'));
}

// Values: 0 org, 1 lower-cased email.
const contactIdByEmail = new PreparedQuery((db, slot) =>
  db.selectFrom('contacts').select('id').where('org_id', '=', slot<string>(0)).where('email_lower', '=', slot<string>(1)),
);
// Values: 0 org, 1 external id.
const contactIdByExternalId = new PreparedQuery((db, slot) =>
  db.selectFrom('contacts').select('id').where('org_id', '=', slot<string>(0)).where('external_id', '=', slot<string>(1)),
);

/**
 * The conflict a write of these values would meet with another contact than `self`: the email's
 * (contact_exists) or the external id's (external_id_exists), naming the holder; null if none.
 */
export async function conflictOf(
  db: Kysely<Database>,
  orgId: string,
  values: { email?: string; external_id?: string | null },
  self: string | null = null,
): Promise<ConflictError | null> {
  if (values.email !== undefined) {
    const [holder] = await contactIdByEmail.execute(db, [orgId, values.email.toLowerCase()]);
    if (holder && holder.id !== self) return duplicateEmail(values.email, holder.id);
  }
  if (values.external_id != null) {
    const [holder] = await contactIdByExternalId.execute(db, [orgId, values.external_id]);
    if (holder && holder.id !== self) return duplicateExternalId(holder.id);
  }
  return null;
}

/**
 * The error for a unique violation of a write of `values`: the conflict naming the holder, looked
 * up afterwards with `db`; with `db` null (a transaction PostgreSQL has aborted) without the holder.
 */
export async function conflictAfter(
  error: unknown,
  db: Kysely<Database> | null,
  orgId: string,
  values: { email?: string; external_id?: string | null },
  self: string | null = null,
): Promise<unknown> {
  if (!isUniqueViolation(error)) return error;
  const external = onExternalId(error);
  if (external && values.external_id == null) return error;
  if (!external && values.email === undefined) return error;
  if (db === null) return external ? duplicateExternalId(null) : duplicateEmail(values.email!, null);
  const found = await conflictOf(db, orgId, external ? { external_id: values.external_id } : { email: values.email }, self);
  return found ?? (external ? duplicateExternalId(null) : duplicateEmail(values.email!, null));
}
