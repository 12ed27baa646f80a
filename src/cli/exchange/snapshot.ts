import path from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { postgresTarget, tlsFor } from '../../db/postgresTls.js';
import type { Config } from '../../config.js';
import { quoted, type Query } from './tables.js';

/** Rows a page of PostgreSQL's cursor carries: memory stays flat whatever the table's size. */
const PAGE = 1000;

/**
 * One consistent, read-only view of the database for an export, on a connection of its own:
 * every table is read as it was at one instant while the server goes on writing. SQLite: a
 * deferred read transaction (WAL: it never blocks writers, and sees none of their commits);
 * never `BEGIN IMMEDIATE`, which would hold the server's write lock for the whole export.
 * PostgreSQL: a `REPEATABLE READ READ ONLY` transaction, read through a cursor.
 */
export interface Snapshot {
  dialect: 'sqlite' | 'postgres';
  query: Query;
  /** The rows of a table (those whose column `where[0]` is one of `where[1]` when given), one at a time. */
  rows(table: string, columns: string[], where?: [string, string[]]): AsyncIterable<Record<string, unknown>>;
  close(): Promise<void>;
}

export async function openSnapshot(config: Config): Promise<Snapshot> {
  return config.databaseUrl ? openPostgresSnapshot(config.databaseUrl) : openSqliteSnapshot(config.dataDir);
}

function selectText(table: string, columns: string[], where: [string, string[]] | undefined, placeholder: (n: number) => string): string {
  const among = where ? ` where ${quoted(where[0])} in (${where[1].map((_, i) => placeholder(i + 1)).join(', ')})` : '';
  return `select ${columns.map(quoted).join(', ')} from ${quoted(table)}${among}`;
}

function openSqliteSnapshot(dataDir: string): Snapshot {
  const db = new SQLite(path.join(dataDir, 'orgdata.sqlite'), { readonly: true, fileMustExist: true });
  db.pragma('busy_timeout = 5000');
  db.exec('begin');
  // The snapshot is taken at the first read, now rather than at the first table.
  db.prepare('select count(*) from sqlite_master').get();
  return {
    dialect: 'sqlite',
    query: (text, params = []) => Promise.resolve(db.prepare(text).all(...params) as Record<string, unknown>[]),
    async *rows(table, columns, where) {
      const statement = db.prepare(selectText(table, columns, where, () => '?'));
      // iterate() steps through the table: one row in memory at a time.
      for (const row of statement.iterate(...(where ? where[1] : []))) yield row as Record<string, unknown>;
    },
    close: () => {
      if (db.inTransaction) db.exec('commit');
      db.close();
      return Promise.resolve();
    },
  };
}

async function openPostgresSnapshot(databaseUrl: string): Promise<Snapshot> {
  const target = postgresTarget(databaseUrl);
  const client = new pg.Client({
    connectionString: target.connectionString,
    ssl: await tlsFor(target),
    connectionTimeoutMillis: 5000,
    application_name: 'orgdata export',
  });
  await client.connect();
  await client.query('begin isolation level repeatable read read only');
  let cursors = 0;
  return {
    dialect: 'postgres',
    query: async (text, params = []) => (await client.query(text, params)).rows as Record<string, unknown>[],
    async *rows(table, columns, where) {
      const cursor = `orgdata_export_${++cursors}`;
      await client.query(
        `declare ${cursor} no scroll cursor for ${selectText(table, columns, where, (n) => `$${n}`)}`,
        where ? where[1] : [],
      );
      for (;;) {
        const { rows } = await client.query(`fetch ${PAGE} from ${cursor}`);
        for (const row of rows) yield row as Record<string, unknown>;
        if (rows.length < PAGE) break;
      }
      await client.query(`close ${cursor}`);
    },
    close: async () => {
      try {
        await client.query('commit');
      } finally {
        await client.end();
      }
    },
  };
}
