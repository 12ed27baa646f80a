import { sql, type DatabaseIntrospector, type Kysely, type SchemaMetadata, type TableMetadata } from 'kysely';
import type { Database } from './schema.js';

/**
 * What the Migrator asks before it migrates (does its schema exist, do its two tables), answered
 * from the catalog for our schema alone. Kysely's PostgreSQL introspector reads every table of
 * every schema in the database and calls pg_get_serial_sequence on each column: when another
 * session drops a schema meanwhile (another application's on a shared database, a test's), that
 * call fails and so does our migration, with `schema "…" does not exist` naming a schema that is
 * not ours (seen in CI: two test workers creating and dropping schemas of their own).
 */
export function ownTables(kysely: Kysely<Database>, schema: string | undefined): DatabaseIntrospector {
  const getTables = async (): Promise<TableMetadata[]> => {
    const { rows } = await sql<{ name: string; schema: string }>`
      select c.relname as name, n.nspname as schema
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where c.relkind in ('r', 'p') and n.nspname = coalesce(${schema ?? null}::text, current_schema())`.execute(kysely);
    return rows.map((row) => ({ name: row.name, schema: row.schema, isView: false, columns: [] }));
  };
  return {
    getSchemas: async (): Promise<SchemaMetadata[]> =>
      schema === undefined
        ? []
        : (await sql<SchemaMetadata>`select nspname as name from pg_catalog.pg_namespace where nspname = ${schema}`.execute(kysely)).rows,
    getTables,
    getMetadata: async () => ({ tables: await getTables() }),
  };
}

/** The same Kysely (pool, plugins, transactions) with another introspector. */
export function withIntrospector(kysely: Kysely<Database>, introspector: DatabaseIntrospector): Kysely<Database> {
  return new Proxy(kysely, {
    get(target, property) {
      if (property === 'introspection') return introspector;
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}
