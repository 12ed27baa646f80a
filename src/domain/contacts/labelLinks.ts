import type { Kysely } from 'kysely';
import { inRetriedTransaction, lockRow } from '../../db/transaction.js';
import type { Database } from '../../db/schema.js';
import type { Ctx } from '../context.js';
import { NotFoundError } from '../errors.js';
import { nowIso } from '../ids.js';
import { requireScope } from '../scopes.js';
import { updated } from './contacts.js';
import { getContact } from './read.js';
import type { ContactView } from './view.js';

// Attaching a label to a contact and detaching it: one link each, the contact's events with it.

async function requireLabel(db: Kysely<Database>, orgId: string, labelId: string): Promise<void> {
  const label = await db.selectFrom('labels').select('id').where('org_id', '=', orgId).where('id', '=', labelId).executeTakeFirst();
  if (!label) throw new NotFoundError(`No label ${labelId}.`);
}

/**
 * Locks the contact, checks the label, applies `change` to the link; when it changed a row the
 * contact is touched and `contact.updated` recorded. Returns the contact as it is then.
 */
async function changeLink(
  ctx: Ctx,
  contactId: string,
  labelId: string,
  change: (trx: Kysely<Database>, before: ContactView, at: string) => Promise<boolean>,
): Promise<ContactView> {
  requireScope(ctx.actor, 'contacts:write');
  const at = nowIso(ctx.now);
  return inRetriedTransaction(ctx.db, async (trx) => {
    const inTrx = { ...ctx, db: trx };
    if (!(await lockRow(trx, 'contacts', ctx.orgId, contactId))) throw new NotFoundError(`No contact ${contactId}.`);
    await requireLabel(trx, ctx.orgId, labelId);
    const before = await getContact(inTrx, contactId);
    if (!(await change(trx, before, at))) return before;
    await trx.updateTable('contacts').set({ updated_at: at }).where('id', '=', contactId).execute();
    return updated(trx, ctx, before, await getContact(inTrx, contactId));
  });
}

/** Attaches a label (a no-op when it is already attached) and returns the contact. */
export function attachLabel(ctx: Ctx, contactId: string, labelId: string): Promise<ContactView> {
  return changeLink(ctx, contactId, labelId, async (trx, before, at) => {
    const inserted = await trx
      .insertInto('contact_labels')
      .values({ org_id: ctx.orgId, contact_id: contactId, label_id: labelId, created_at: at, contact_created_at: before.created_at })
      .onConflict((oc) => oc.columns(['contact_id', 'label_id']).doNothing())
      .executeTakeFirst();
    return Number(inserted.numInsertedOrUpdatedRows ?? 0) > 0;
  });
}

/** Detaches a label (a no-op when it is not attached) and returns the contact. */
export function detachLabel(ctx: Ctx, contactId: string, labelId: string): Promise<ContactView> {
  return changeLink(ctx, contactId, labelId, async (trx) => {
    const removed = await trx
      .deleteFrom('contact_labels')
      .where('contact_id', '=', contactId)
      .where('label_id', '=', labelId)
      .executeTakeFirst();
    return Number(removed.numDeletedRows) > 0;
  });
}
