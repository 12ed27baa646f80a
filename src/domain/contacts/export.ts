import type { Ctx } from '../context.js';
import type { Position } from '../pagination.js';
import { requireScope } from '../scopes.js';
import { IMPORT_COLUMNS } from './import.js';
import { listContacts, type ContactFilters, type ContactSort } from './list.js';
import type { ContactView } from './view.js';

/**
 * Contacts as CSV (the dashboard's "Export CSV", issue 19): every contact the filters select, in
 * the list's order, read a page of 500 at a time along the list's keyset, so memory stays the same
 * for ten contacts or a million. The first seven columns are the CSV import's (labels by name,
 * `;`-separated): a file cut to them imports again. Then what only an export carries.
 */
export const EXPORT_COLUMNS = [...IMPORT_COLUMNS, 'external_id', 'metadata', 'source_type', 'created_at', 'updated_at', 'id'] as const;

const PAGE = 500;

/**
 * A cell as CSV: quoted when it holds a comma, quote or line break. A value a spreadsheet would
 * run as a formula (starting with `=`, `@`, a tab or a carriage return, or `+`/`-` not followed by
 * a phone number's characters alone) gets a leading `'` (OWASP's CSV injection advice), so a
 * contact named `=HYPERLINK(…)` is text, while `+44 20 7946 0958` stays as it is.
 */
export function csvCell(value: string): string {
  let cell = value;
  if (/^[=@\t\r]/.test(cell) || (/^[+-]/.test(cell) && !/^[+-][\d\s().-]*$/.test(cell))) cell = `'${cell}`;
  return /[",\r\n]/.test(cell) ? `"${cell.replace(/"/g, '""')}"` : cell;
}

function row(contact: ContactView): string {
  const cells: Record<(typeof EXPORT_COLUMNS)[number], string> = {
    first_name: contact.first_name,
    last_name: contact.last_name,
    email: contact.email,
    phone: contact.phone ?? '',
    address: contact.address ?? '',
    notes: contact.notes ?? '',
    labels: contact.labels.map((label) => label.name).join(';'),
    external_id: contact.external_id ?? '',
    metadata: Object.keys(contact.metadata).length > 0 ? JSON.stringify(contact.metadata) : '',
    source_type: contact.source_type,
    created_at: contact.created_at,
    updated_at: contact.updated_at,
    id: contact.id,
  };
  return EXPORT_COLUMNS.map((column) => csvCell(cells[column])).join(',') + '\r\n';
}

/** The CSV text, a header line and then a page of rows at a time (RFC 4180, CRLF line ends). */
export async function* contactsCsv(ctx: Ctx, filters: ContactFilters, sort: ContactSort): AsyncGenerator<string> {
  requireScope(ctx.actor, 'contacts:read');
  yield EXPORT_COLUMNS.join(',') + '\r\n';
  let after: Position | null = null;
  for (;;) {
    const page = await listContacts(ctx, { limit: PAGE, after }, filters, sort);
    if (page.items.length > 0) yield page.items.map(row).join('');
    if (!page.hasMore || !page.last) return;
    after = page.last;
  }
}
