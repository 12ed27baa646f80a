/**
 * Bulk seeding for `npm run bench:scale`, straight into the database (not through the API): many
 * rows per INSERT, many INSERTs per transaction. Ids are made as the app makes them (newId).
 */
import { searchText } from '../../src/domain/contacts/searchText.js';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { newId } from '../../src/domain/ids.js';
import { CONTACT_INSERT_COLUMNS } from '../../src/domain/contacts/contacts.js';

type Value = string | number | null;

/** Writes rows into one table; `close` flushes what is buffered. */
export interface BulkWriter {
  insert(table: string, columns: string[], rows: Iterable<Value[]>): Promise<void>;
  /** Runs SQL with no result (ANALYZE, …). */
  exec(text: string): Promise<void>;
  close(): Promise<void>;
}

const SQLITE_ROWS_PER_INSERT = 500;
const SQLITE_ROWS_PER_TRANSACTION = 100_000;

export function sqliteWriter(file: string): BulkWriter {
  const db = new SQLite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = OFF');
  const statements = new Map<string, SQLite.Statement>();
  const statement = (table: string, columns: string[], rows: number) => {
    const text = `insert into ${table} (${columns.join(', ')}) values ${Array.from({ length: rows }, () => `(${columns.map(() => '?').join(', ')})`).join(', ')}`;
    let prepared = statements.get(text);
    if (!prepared) statements.set(text, (prepared = db.prepare(text)));
    return prepared;
  };
  return {
    insert(table, columns, rows) {
      let batch: Value[][] = [];
      let inTransaction = 0;
      const flush = () => {
        if (batch.length === 0) return;
        if (inTransaction === 0) db.exec('begin');
        statement(table, columns, batch.length).run(batch.flat());
        inTransaction += batch.length;
        batch = [];
        if (inTransaction >= SQLITE_ROWS_PER_TRANSACTION) {
          db.exec('commit');
          inTransaction = 0;
        }
      };
      for (const row of rows) {
        batch.push(row);
        if (batch.length === SQLITE_ROWS_PER_INSERT) flush();
      }
      flush();
      if (inTransaction > 0) db.exec('commit');
      return Promise.resolve();
    },
    exec(text) {
      db.exec(text);
      return Promise.resolve();
    },
    close() {
      db.close();
      return Promise.resolve();
    },
  };
}

const PG_ROWS_PER_INSERT = 20_000;

/** PostgreSQL: `insert … select * from unnest($1::text[], …)`, one array per column, 20,000 rows a statement. */
export function postgresWriter(url: string): BulkWriter {
  const client = new pg.Client({ connectionString: url });
  const connected = client.connect();
  return {
    async insert(table, columns, rows) {
      await connected;
      let batch: Value[][] = [];
      const flush = async () => {
        if (batch.length === 0) return;
        const types = columns.map((_, i) => (typeof batch[0]![i] === 'number' ? 'bigint' : 'text'));
        const arrays = columns.map((_, i) => batch.map((row) => row[i]));
        await client.query(
          `insert into ${table} (${columns.join(', ')}) select * from unnest(${types.map((t, i) => `$${i + 1}::${t}[]`).join(', ')})`,
          arrays,
        );
        batch = [];
      };
      await client.query('begin');
      for (const row of rows) {
        batch.push(row);
        if (batch.length === PG_ROWS_PER_INSERT) await flush();
      }
      await flush();
      await client.query('commit');
    },
    async exec(text) {
      await connected;
      await client.query(text);
    },
    async close() {
      await connected;
      await client.end();
    },
  };
}

export interface Seeded {
  labelIds: string[];
  /** Contacts in list order, created_at ascending (a sample of their ids and emails is kept). */
  count: number;
  sampleIds: string[];
  sampleEmails: string[];
  /** The id and created_at of the contact at position `deep` (0-based), for a deep cursor. */
  deepRow: { id: string; createdAt: string };
  groupId: string;
}

const SAMPLE = 5000;

/**
 * `count` contacts in one organisation, created_at ascending (two per millisecond, so ties are
 * broken by id as in real use), with 4 labels: contact i has i % 3 of the first 3. One group holding
 * the first 10,000 contacts, `count / 10` events (one in a thousand `file.uploaded`, a rare type;
 * the others `contact.created`) and 1,000 files (every tenth one ready). Then 200 small other
 * organisations (seedOtherOrgs).
 */
export async function seed(writer: BulkWriter, orgId: string, count: number, deep: number): Promise<Seeded> {
  const start = Date.UTC(2020, 0, 1);
  const at = (i: number) => new Date(start + Math.floor(i / 2)).toISOString();
  // The fourth label is on no contact: filtering by it is the label filter's worst case.
  const labelIds = ['Customer', 'Supplier', 'Press', 'Unused'].map(() => newId('lbl'));
  await writer.insert(
    'labels',
    ['id', 'org_id', 'name', 'name_lower', 'created_at', 'updated_at'],
    labelIds.map((id, i) => [id, orgId, `Label ${i}`, `label ${i}`, at(i), at(i)]),
  );
  const ids: string[] = new Array<string>(count);
  for (let i = 0; i < count; i++) ids[i] = newId('con');
  const email = (i: number) => `person-${i}@example.com`;
  await writer.insert(
    'contacts',
    [...CONTACT_INSERT_COLUMNS],
    (function* () {
      for (let i = 0; i < count; i++) {
        // In CONTACT_INSERT_COLUMNS order. Every contact has an external id and one metadata pair
        // (a thousand contacts share each value); `first` is in every search_text, `first 12345` in one.
        const row = { first_name: `First ${i}`, last_name: 'Contact', email: email(i), phone: '+44 20 7946 0000' };
        yield [
          ids[i]!,
          orgId,
          row.first_name,
          row.last_name,
          row.email,
          row.email,
          row.phone,
          null,
          null,
          'csv_import',
          `ext-${i}`,
          JSON.stringify({ tier: `t${i % Math.max(1, Math.floor(count / 1000))}` }),
          searchText(row),
          at(i),
          at(i),
        ];
      }
    })(),
  );
  await writer.insert(
    'contact_metadata',
    ['org_id', 'contact_id', 'key', 'value', 'contact_created_at'],
    (function* () {
      for (let i = 0; i < count; i++) yield [orgId, ids[i]!, 'tier', `t${i % Math.max(1, Math.floor(count / 1000))}`, at(i)];
    })(),
  );
  await writer.insert(
    'contact_labels',
    ['org_id', 'contact_id', 'label_id', 'created_at', 'contact_created_at'],
    (function* () {
      for (let i = 0; i < count; i++) {
        for (let k = 0; k < i % 3; k++) yield [orgId, ids[i]!, labelIds[(i + k) % 3]!, at(i), at(i)];
      }
    })(),
  );
  const groupId = newId('grp');
  await writer.insert(
    'groups',
    ['id', 'org_id', 'name', 'description', 'created_at', 'updated_at'],
    [[groupId, orgId, 'Big group', null, at(0), at(0)]],
  );
  await writer.insert(
    'group_members',
    ['org_id', 'group_id', 'contact_id', 'added_at'],
    ids.slice(0, 10_000).map((id, i) => [orgId, groupId, id, at(i)]),
  );
  await writer.insert(
    'events',
    ['id', 'org_id', 'type', 'resource', 'data', 'created_at'],
    (function* () {
      for (let i = 0; i < count; i += 10) {
        const file = i % 10_000 === 0;
        yield [newId('evt'), orgId, file ? 'file.uploaded' : 'contact.created', file ? 'file' : 'contact', '{"object":{}}', at(i)];
      }
    })(),
  );
  await writer.insert(
    'files',
    [
      'id',
      'org_id',
      'name',
      'content_type',
      'size',
      'status',
      'sha256',
      'storage_key',
      'upload_expires_at',
      'created_at',
      'updated_at',
      'uploaded_at',
    ],
    Array.from({ length: 1000 }, (_, i) => [
      newId('file'),
      orgId,
      `file-${i}.txt`,
      'text/plain',
      10,
      i % 10 === 0 ? 'ready' : 'pending',
      null,
      null,
      at(i),
      at(i),
      at(i),
      null,
    ]),
  );
  await seedOtherOrgs(writer, at(count));
  const step = Math.max(1, Math.floor(count / SAMPLE));
  const sample = Array.from({ length: Math.min(SAMPLE, count) }, (_, k) => k * step);
  return {
    labelIds,
    count,
    sampleIds: sample.map((i) => ids[i]!),
    sampleEmails: sample.map(email),
    deepRow: { id: ids[deep]!, createdAt: at(deep) },
    groupId,
  };
}

const OTHER_ORGS = 200;

/**
 * Other organisations beside the big one, each with 5 labels, 100 contacts (each with one label),
 * 5 groups of 20 members and 50 events: the planner then knows that a table holds several
 * organisations' rows, as in a real deployment, rather than seeing the big one own every row.
 */
async function seedOtherOrgs(writer: BulkWriter, at: string): Promise<void> {
  const orgs = Array.from({ length: OTHER_ORGS }, () => newId('org'));
  await writer.insert(
    'orgs',
    ['id', 'name', 'created_at'],
    orgs.map((id, i) => [id, `Other ${i}`, at]),
  );
  const labels = orgs.map((org) => Array.from({ length: 5 }, (_, k) => [newId('lbl'), org, `Label ${k}`, `label ${k}`, at, at] as Value[]));
  await writer.insert('labels', ['id', 'org_id', 'name', 'name_lower', 'created_at', 'updated_at'], labels.flat());
  const contacts = orgs.map(() => Array.from({ length: 100 }, () => newId('con')));
  await writer.insert(
    'contacts',
    [...CONTACT_INSERT_COLUMNS],
    contacts.flatMap((ids, o) =>
      ids.map((id, i) => {
        const email = `other-${i}@org-${o}.example.com`;
        const words = searchText({ first_name: `Other ${i}`, last_name: 'Contact', email, phone: null });
        return [id, orgs[o]!, `Other ${i}`, 'Contact', email, email, null, null, null, 'csv_import', null, '{}', words, at, at];
      }),
    ),
  );
  await writer.insert(
    'contact_labels',
    ['org_id', 'contact_id', 'label_id', 'created_at', 'contact_created_at'],
    contacts.flatMap((ids, o) => ids.map((id, i) => [orgs[o]!, id, labels[o]![i % 5]![0]!, at, at])),
  );
  const groups = orgs.map((org) => Array.from({ length: 5 }, (_, k) => [newId('grp'), org, `Group ${k}`, null, at, at] as Value[]));
  await writer.insert('groups', ['id', 'org_id', 'name', 'description', 'created_at', 'updated_at'], groups.flat());
  await writer.insert(
    'group_members',
    ['org_id', 'group_id', 'contact_id', 'added_at'],
    groups.flatMap((list, o) =>
      list.flatMap((group, k) => contacts[o]!.slice(k * 20, k * 20 + 20).map((id) => [orgs[o]!, group[0]!, id, at])),
    ),
  );
  await writer.insert(
    'events',
    ['id', 'org_id', 'type', 'resource', 'data', 'created_at'],
    orgs.flatMap((org) => Array.from({ length: 50 }, () => [newId('evt'), org, 'contact.created', 'contact', '{"object":{}}', at])),
  );
}
