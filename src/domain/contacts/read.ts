import { PreparedQuery } from '../../db/preparedQuery.js';
import type { Ctx } from '../context.js';
import { NotFoundError } from '../errors.js';
import { requireScope } from '../scopes.js';
import { CONTACT_COLUMNS, contactJson, toContactViews, type ContactView } from './view.js';

// Reading one contact: as objects (the dashboard, the write paths) or as JSON text (the API).

// Values: 0 org, 1 contact id.
const contactById = new PreparedQuery((db, slot) =>
  db
    .selectFrom('contacts')
    .select(CONTACT_COLUMNS)
    .where('contacts.org_id', '=', slot<string>(0))
    .where('contacts.id', '=', slot<string>(1)),
);

const contactJsonById = new PreparedQuery((db, slot) =>
  db
    .selectFrom('contacts')
    .select(contactJson(db).as('json'))
    .where('contacts.org_id', '=', slot<string>(0))
    .where('contacts.id', '=', slot<string>(1)),
);

/** getContact as JSON text made by the database in one statement (see contactJson): the API's read. */
export async function getContactJson(ctx: Ctx, id: string): Promise<string> {
  requireScope(ctx.actor, 'contacts:read');
  const [row] = await contactJsonById.execute(ctx.db, [ctx.orgId, id]);
  if (!row) throw new NotFoundError(`No contact ${id}.`);
  return row.json;
}

export async function getContact(ctx: Ctx, id: string): Promise<ContactView> {
  requireScope(ctx.actor, 'contacts:read');
  const [row] = await contactById.execute(ctx.db, [ctx.orgId, id]);
  if (!row) throw new NotFoundError(`No contact ${id}.`);
  const [view] = await toContactViews(ctx.db, ctx.orgId, [row]);
  return view!;
}
