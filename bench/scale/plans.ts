/**
 * The query plans of every list the API serves, for `npm run bench:scale`: the domain functions
 * run against a Kysely that records the SQL they build, then each statement is explained with its
 * own parameters. A plan that sorts, or scans a table rather than searching an index, is flagged.
 */
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, type CompiledQuery } from 'kysely';
import pg from 'pg';
import { stableStatementText } from '../../src/db/database.js';
import type { Database } from '../../src/db/schema.js';
import type { Ctx } from '../../src/domain/context.js';
import { listContactsJson as listContacts } from '../../src/domain/contacts/list.js';
import { listEvents } from '../../src/domain/events/events.js';
import { listFiles } from '../../src/domain/files/files.js';
import { listGroups } from '../../src/domain/groups/groups.js';
import { listMembers } from '../../src/domain/groups/members.js';
import { listLabels } from '../../src/domain/labels/labels.js';
import { getContactJson } from '../../src/domain/contacts/read.js';
import { expandScopes } from '../../src/domain/scopes.js';
import type { Seeded } from './seed.js';

export interface Plan {
  name: string;
  sql: string;
  plan: string[];
  flags: string[];
  /** What the case requires of its plan and the plan does not do: the bench fails on any. */
  failures: string[];
}

/** A case's required index: one name for both databases, or a pattern per database. */
type Driver = string | { sqlite: RegExp; postgres: RegExp };

interface Explainer {
  db: Kysely<Database>;
  explain(query: CompiledQuery): Promise<string[]>;
  close(): Promise<void>;
}

function sqliteExplainer(file: string, log: (query: CompiledQuery) => void): Explainer {
  const sqlite = new SQLite(file, { readonly: true });
  return {
    db: new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }), log: (event) => log(event.query) }),
    explain: (query) =>
      Promise.resolve(
        (
          sqlite.prepare(`explain query plan ${stableStatementText(query.sql)}`).all(...(query.parameters as unknown[])) as {
            detail: string;
          }[]
        ).map((row) => row.detail),
      ),
    close: async () => void sqlite.close(),
  };
}

function postgresExplainer(url: string, log: (query: CompiledQuery) => void): Explainer {
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  return {
    db: new Kysely<Database>({ dialect: new PostgresDialect({ pool }), log: (event) => log(event.query) }),
    explain: async (query) =>
      (await pool.query<{ 'QUERY PLAN': string }>(`explain ${query.sql}`, query.parameters as unknown[])).rows.map((r) => r['QUERY PLAN']),
    close: () => pool.end(),
  };
}

/**
 * Sorting, or reading a whole table; an index range scan that filters rows is noted too (not a
 * primary-key lookup's filter: that reads one row). With `drivenBy`, the first table access must
 * be a range of that index: SQLite prints no residual filters, so a walk of the organisation's
 * rows in list order that drops most of them shows only as the wrong index driving the query.
 * On PostgreSQL a filtered range the planner expects to leave early is not flagged (stopsEarly).
 */
function flagsOf(plan: string[]): string[] {
  const flags: string[] = [];
  const early = stopsEarly(plan);
  let node = '';
  for (const line of plan) {
    if (/USE TEMP B-TREE FOR ORDER BY|(^|\s)Sort( |$)|Sort Key|Incremental Sort/.test(line)) flags.push(`sorts: ${line.trim()}`);
    if (/^SCAN \w+$|SCAN \w+ USING (COVERING )?INDEX \S+$|Seq Scan/.test(line.trim())) flags.push(`scans: ${line.trim()}`);
    if (/Scan|SEARCH|SCAN/.test(line)) node = line;
    if (/^\s*(->\s*)?Filter:/.test(line) && !/using \w+_pkey on/.test(node) && !(early && node === early)) {
      flags.push(`filters rows of an index range: ${line.trim()}`);
    }
  }
  return flags;
}

/** What a plan lacks of the case's required index (see Driver), for the bench to fail on. */
function failuresOf(dialect: 'sqlite' | 'postgres', plan: string[], drivenBy?: Driver): string[] {
  if (!drivenBy) return [];
  if (typeof drivenBy !== 'string') {
    const pattern = drivenBy[dialect];
    return plan.some((line) => pattern.test(line)) ? [] : [`does not use ${pattern}`];
  }
  if (stopsEarly(plan)) return [];
  const first = plan.find((line) => /Scan|SEARCH|SCAN/.test(line))?.trim() ?? '(no table access)';
  const range = new RegExp(`^SEARCH \\w+ USING (COVERING )?INDEX ${drivenBy} \\(|Index (Only )?Scan (Backward )?using ${drivenBy} on`);
  return range.test(first) ? [] : [`not a range of ${drivenBy} in list order: ${first}`];
}

/**
 * PostgreSQL only: the first table access when it is a range of an index under the plan's Limit
 * and the planner expects to read under 2 % of that range before the Limit is reached (the
 * Limit's cost against the range's): a filter on it drops few rows, by the column statistics,
 * e.g. `type=contact.created` when nearly every event is one. The filtered walk then reads about
 * `limit` rows. A rare value makes the planner take the filter's own index instead (file.*).
 */
function stopsEarly(plan: string[]): string | undefined {
  const cost = (line: string) => Number(/cost=[\d.]+\.\.([\d.]+)/.exec(line)?.[1] ?? Number.NaN);
  const first = plan.find((line) => /Scan|SEARCH|SCAN/.test(line));
  if (!first || !/^Limit /.test(plan[0]?.trim() ?? '') || !/Index (Only )?Scan using \w+ on/.test(first)) return undefined;
  return cost(plan[0]!) / cost(first) < 0.02 ? first : undefined;
}

export async function explainLists(dialect: 'sqlite' | 'postgres', target: string, orgId: string, seeded: Seeded): Promise<Plan[]> {
  let captured: CompiledQuery[] = [];
  const explainer =
    dialect === 'sqlite' ? sqliteExplainer(target, (q) => captured.push(q)) : postgresExplainer(target, (q) => captured.push(q));
  const ctx: Ctx = {
    db: explainer.db,
    orgId,
    actor: { kind: 'api_key', keyId: 'key_bench', scopes: expandScopes(['contacts:write', 'groups:write', 'files:write']) },
    requestId: 'bench',
    now: new Date(),
  };
  const after = { createdAt: seeded.deepRow.createdAt, id: seeded.deepRow.id };
  const page = { limit: 25, after: null };
  const [used, , , unused] = seeded.labelIds as [string, string, string, string];
  // Each case, and the index that must drive its page's statement (its last: a search on SQLite
  // counts its matches first) when that is not plain to see.
  const fewMatches = { sqlite: /^SCAN contacts_fts VIRTUAL TABLE INDEX/, postgres: /Bitmap Index Scan on contacts_search_terms/ };
  const cases: [string, () => Promise<unknown>, Driver?][] = [
    ['contacts', () => listContacts(ctx, page), 'contacts_page'],
    ['contacts after a cursor', () => listContacts(ctx, { limit: 25, after }), 'contacts_page'],
    ['contacts email=', () => listContacts(ctx, page, { email: 'person-7@example.com' })],
    ['contacts label_id=', () => listContacts(ctx, page, { labelId: used }), 'contact_labels_page'],
    ['contacts label_id= after a cursor', () => listContacts(ctx, { limit: 25, after }, { labelId: used }), 'contact_labels_page'],
    ['contacts label_id= unused label', () => listContacts(ctx, page, { labelId: unused }), 'contact_labels_page'],
    // The dashboard's previous page: the same links walked backwards from a position.
    [
      'contacts label_id= backwards (previous page)',
      () => listContacts(ctx, { limit: 25, after }, { labelId: used }, '-created_at'),
      'contact_labels_page',
    ],
    ['contacts backwards (previous page)', () => listContacts(ctx, { limit: 25, after }, {}, '-created_at'), 'contacts_page'],
    [
      'contacts label_id= unused label after a cursor',
      () => listContacts(ctx, { limit: 25, after }, { labelId: unused }),
      'contact_labels_page',
    ],
    // At most one contact has the email: its links are looked up by primary key.
    ['contacts email= label_id=', () => listContacts(ctx, page, { email: 'person-7@example.com', labelId: used })],
    ['contacts email= label_id= unused label', () => listContacts(ctx, page, { email: 'person-7@example.com', labelId: unused })],
    // The dashboard's label page with its search box: the label's links in order, each contact checked.
    ['contacts label_id= q=', () => listContacts(ctx, page, { labelId: used, words: ['first', '9'] }), 'contact_labels_page'],
    // Sync (issue 18). A search with few matches reads them from the terms' index and sorts them;
    // one with many walks the list in order.
    ['contacts q= (a word in one contact)', () => listContacts(ctx, page, { words: ['first', '12345'] }), fewMatches],
    ['contacts q= (a word in every contact)', () => listContacts(ctx, page, { words: ['first'] }), 'contacts_page'],
    ['contacts q= (a long word and a rare one)', () => listContacts(ctx, page, { words: ['example', '12345'] }), fewMatches],
    [
      'contacts updated_after= (recent)',
      () => listContacts(ctx, page, { updatedAfter: seeded.deepRow.createdAt }, 'updated_at'),
      'contacts_page_updated',
    ],
    ['contacts sort=-updated_at', () => listContacts(ctx, page, {}, '-updated_at'), 'contacts_page_updated'],
    ['contacts sort=last_name', () => listContacts(ctx, page, {}, 'last_name'), 'contacts_page_last_name'],
    ['contacts metadata[tier]=t7', () => listContacts(ctx, page, { metadata: { key: 'tier', value: 't7' } }), 'contact_metadata_page'],
    ['contacts external_id=', () => listContacts(ctx, page, { externalId: 'ext-7' })],
    ['contact by id', () => getContactJson(ctx, seeded.sampleIds[1]!)],
    ['labels', () => listLabels(ctx, page)],
    ['groups', () => listGroups(ctx, page)],
    ['group members', () => listMembers(ctx, seeded.groupId, page)],
    ['files status=ready', () => listFiles(ctx, page, { status: 'ready' })],
    ['events', () => listEvents(ctx, page), 'events_page'],
    ['events type=contact.created', () => listEvents(ctx, page, { type: 'contact.created' }), 'events_page_type'],
    ['events type=contact.*', () => listEvents(ctx, page, { type: 'contact.*' }), 'events_page_resource'],
    ['events type=file.* (rare)', () => listEvents(ctx, page, { type: 'file.*' }), 'events_page_resource'],
  ];
  const plans: Plan[] = [];
  try {
    for (const [name, run, drivenBy] of cases) {
      captured = [];
      await run();
      for (const [i, query] of captured.entries()) {
        const plan = await explainer.explain(query);
        plans.push({
          name: captured.length > 1 ? `${name} (${i + 1}/${captured.length})` : name,
          sql: query.sql,
          plan,
          flags: flagsOf(plan),
          failures: failuresOf(dialect, plan, i === captured.length - 1 ? drivenBy : undefined),
        });
      }
    }
  } finally {
    await explainer.close();
  }
  return plans;
}
