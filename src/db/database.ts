import { existsSync, mkdirSync } from 'node:fs';
import { ConfigError } from '../config.js';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  Migrator,
  PostgresDialect,
  SqliteDialect,
  type Driver,
  type Migration,
  type MigrationProvider,
  type PostgresPool,
  type PostgresPoolClient,
} from 'kysely';
import pg from 'pg';
import * as core from './migrations/001_core.js';
import * as groupsFiles from './migrations/002_groups_files.js';
import * as sessions from './migrations/003_sessions.js';
import * as eventsWebhooks from './migrations/004_events_webhooks.js';
import * as listIndexes from './migrations/005_list_indexes.js';
import * as contactLabelOrder from './migrations/006_contact_label_order.js';
import * as eventResourceOrder from './migrations/007_event_resource_order.js';
import * as dropEventsAge from './migrations/008_drop_events_age.js';
import * as blobPurges from './migrations/009_blob_purges.js';
import * as settings from './migrations/010_settings.js';
import * as sourceTypes from './migrations/011_source_types.js';
import * as contactSync from './migrations/012_contact_sync.js';
import * as contactSearch from './migrations/013_contact_search.js';
import * as searchPrefixes from './migrations/014_search_prefixes.js';
import * as contactEmailDomains from './migrations/015_contact_email_domains.js';
import * as eventActors from './migrations/016_event_actors.js';
import * as requestLog from './migrations/017_request_log.js';
import * as eventSystemActor from './migrations/018_event_system_actor.js';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';

export interface Db {
  kysely: Kysely<Database>;
  dialect: Dialect;
  /** PostgreSQL schema the tables live in, when not the connection's default. */
  pgSchema?: string;
  /**
   * The connection pool now, for GET /metrics; null on SQLite: one connection inside the process,
   * whose statements run synchronously, so there is no pool to be short of and no queue to see.
   */
  poolStats(): PoolStats | null;
  close(): Promise<void>;
}

/** PostgreSQL's connection pool at one instant (node-postgres' counts, without its types). */
export interface PoolStats {
  /** Connections the pool may open (DATABASE_POOL_SIZE). */
  max: number;
  /** Connections open, checked out by a request or a worker, or idle in the pool. */
  inUse: number;
  idle: number;
  /** Requests waiting for a connection because all `max` are in use. */
  waiting: number;
}

export interface DatabaseOptions {
  /** A postgres:// URL, or null for the embedded SQLite database. */
  databaseUrl: string | null;
  /** Where the SQLite file lives (`DATA_DIR`); ':memory:' is accepted for tests. */
  dataDir: string;
  /** PostgreSQL only: the schema to work in (tests give each run its own). */
  pgSchema?: string;
  /** PostgreSQL only: connections in the pool (`DATABASE_POOL_SIZE`); default 10. */
  poolSize?: number;
  /**
   * PostgreSQL only: the server cancels a statement running longer than this, waiting for a lock
   * included (`DATABASE_STATEMENT_TIMEOUT_MS`), so one slow query cannot hold a connection forever.
   * Default none.
   */
  statementTimeoutMs?: number;
  /**
   * SQLite only: refuse to create the database file when there is none (every CLI command but
   * `serve` and `migrate`: a command pointed at the wrong DATA_DIR must say so, not start afresh).
   */
  mustExist?: boolean;
}

export function openDatabase(options: DatabaseOptions): Db {
  if (options.databaseUrl) {
    const pool = new pg.Pool({
      connectionString: options.databaseUrl,
      max: options.poolSize ?? 10,
      // Deadlines, so that an unreachable or stalled server answers 503 instead of hanging a
      // request: getting a connection (a free one from the pool, or a new one) within 5 s; and,
      // where statements have a server-side timeout, an answer within it plus 2 s (the server
      // cancels first; this catches a server that cannot even say so). Keepalive notices idle
      // connections whose peer vanished. A URL's own `application_name` wins over ours.
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      application_name: 'orgdata',
      ...(options.statementTimeoutMs
        ? { statement_timeout: options.statementTimeoutMs, query_timeout: options.statementTimeoutMs + 2000 }
        : {}),
      ...(options.pgSchema ? { options: `-c search_path=${options.pgSchema}` } : {}),
    });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', () => {});
    const kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool: withNamedStatements(pool) }) });
    const max = options.poolSize ?? 10;
    const poolStats = () => ({ max, inUse: pool.totalCount - pool.idleCount, idle: pool.idleCount, waiting: pool.waitingCount });
    return { kysely, dialect: 'postgres', pgSchema: options.pgSchema, poolStats, close: () => kysely.destroy() };
  }
  let file = ':memory:';
  if (options.dataDir !== ':memory:') {
    file = path.join(options.dataDir, 'orgdata.sqlite');
    if (options.mustExist && !existsSync(file)) {
      throw new ConfigError(
        'DATA_DIR',
        `there is no database at ${file}. Point DATA_DIR at the directory the server uses (or set DATABASE_URL as it has it), ` +
          'or start the server once (npm start) or run `orgdata migrate` to create one.',
      );
    }
    mkdirSync(options.dataDir, { recursive: true });
  }
  const sqlite = new SQLite(file);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 5000');
  sqlite.pragma('synchronous = NORMAL');
  const statements = withStatementCache(sqlite);
  const kysely = new Kysely<Database>({ dialect: new ImmediateSqliteDialect({ database: statements }) });
  direct.set(kysely, { sqlite, prepare: statements.prepare });
  return { kysely, dialect: 'sqlite', poolStats: () => null, close: () => kysely.destroy() };
}

/**
 * SQLite's dialect, with every transaction opened by `BEGIN IMMEDIATE`: it takes the write lock
 * at once, waiting up to busy_timeout for another process (the CLI beside a running server, two
 * CLI runs) to finish. Kysely's `BEGIN` is deferred: a transaction that reads and then writes
 * while another process writes fails with SQLITE_BUSY at its first write without waiting, since
 * SQLite cannot upgrade a read snapshot that is no longer the newest. Within one process the
 * dialect's single connection already runs one transaction at a time, so nothing is lost by
 * taking the lock early.
 */
class ImmediateSqliteDialect extends SqliteDialect {
  override createDriver(): Driver {
    const driver = super.createDriver();
    driver.beginTransaction = async (connection) => {
      await connection.executeQuery(CompiledQuery.raw('begin immediate'));
    };
    return driver;
  }
}

const statementNames = new Map<string, string>();

/**
 * Marks a fixed SQL text (a PreparedQuery's: values are always bound) to run on PostgreSQL as a
 * named prepared statement: parsed and planned once per connection rather than on every request
 * (node-postgres sends unnamed statements otherwise). The JSON page of contacts took PostgreSQL
 * 0.32 ms to plan and 0.29 ms to run (EXPLAIN ANALYZE). Behind PgBouncer in transaction mode this
 * needs its prepared-statement support (`max_prepared_statements`, PgBouncer 1.21+).
 */
export function prepareOnPostgres(text: string): void {
  if (!statementNames.has(text)) statementNames.set(text, `orgdata_${statementNames.size}`);
}

const CONNECT_TIMEOUT_MS = 5000;

/**
 * The pool Kysely gets: its clients send the texts marked by prepareOnPostgres by name, and a
 * client whose connection was lost (terminated, reset, or a query past its deadline, after which
 * the connection's state is unknown) refuses further queries at once and leaves the pool when
 * released: Kysely releases without an error, which would put it back for the next request.
 */
function withNamedStatements(pool: pg.Pool): PostgresPool {
  const wrapped = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  return {
    async connect() {
      const client = await pool.connect();
      let wrapper = wrapped.get(client);
      if (!wrapper) {
        let lost: unknown;
        // The pool listens for errors only on idle clients: a connection lost while checked out
        // (between a transaction's queries) emits an 'error' nobody hears, which ends the process.
        client.on('error', (error) => (lost ??= error));
        const send = (text: unknown, values?: unknown[]) => {
          const name = typeof text === 'string' ? statementNames.get(text) : undefined;
          if (name !== undefined) return client.query({ name, text: text as string, values });
          return client.query(text as string, values);
        };
        const query = async (text: unknown, values?: unknown[]) => {
          if (lost !== undefined) throw lost;
          try {
            return await send(text, values);
          } catch (error) {
            if (isConnectionLost(error)) lost = error;
            throw error;
          }
        };
        const release = (error?: Error | boolean) => {
          if (lost !== undefined) wrapped.delete(client);
          client.release(lost !== undefined ? (lost as Error) : error);
        };
        wrapper = { query, release } as unknown as PostgresPoolClient;
        wrapped.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}

/** The SQLite connection behind a database opened here, for reads that skip Kysely's executor. */
export interface DirectSqlite {
  sqlite: SQLite.Database;
  prepare(text: string): SQLite.Statement;
}

const direct = new WeakMap<Kysely<Database>, DirectSqlite>();

/**
 * The SQLite connection of `db` when a statement may run on it directly, synchronously, without
 * Kysely's promises, connection lock and per-query allocations:
 * - `db` is the database itself and no transaction is open on the connection. Kysely's driver has
 *   one connection, which a transaction holds from BEGIN to COMMIT while other queries wait for
 *   it; a read sent directly in that window would see the transaction's uncommitted rows, so then
 *   the answer is undefined and the read goes through Kysely (and waits) like any other.
 * - or `db` is the transaction that holds the connection now (see adoptConnection): its
 *   statements belong on it, and run there in the order the transaction sends them.
 */
export function directSqlite(db: Kysely<Database>): DirectSqlite | undefined {
  const found = direct.get(db);
  if (!found) return undefined;
  return found.sqlite.inTransaction === db.isTransaction ? found : undefined;
}

/**
 * Lets the statements of `trx`, a transaction of `db` open now, run directly on the connection
 * (see directSqlite): a batch of a hundred contacts sends some hundreds of them. Called when the
 * transaction begins; it is forgotten with the transaction object.
 */
export function adoptConnection(trx: Kysely<Database>, db: Kysely<Database>): void {
  const found = direct.get(db);
  if (found && trx.isTransaction) direct.set(trx, found);
}

/** The SQLite connection behind a database opened here, transaction or not (undefined on PostgreSQL). */
export function sqliteConnectionOf(db: Kysely<Database>): DirectSqlite | undefined {
  return direct.get(db);
}

/**
 * Kysely's SQLite driver prepares every statement anew; preparing costs about as much as running
 * a small query. The queries are a fixed set of SQL texts (values are bound), so statements are
 * kept and reused. Bounded, in case some caller ever builds SQL from data.
 */
function withStatementCache(sqlite: SQLite.Database, limit = 500) {
  const statements = new Map<string, SQLite.Statement>();
  return {
    close: () => sqlite.close(),
    prepare: (text: string) => {
      let statement = statements.get(text);
      if (!statement) {
        if (statements.size >= limit) statements.clear();
        statement = sqlite.prepare(text);
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

export const migrations: Record<string, Migration> = {
  '001_core': core,
  '002_groups_files': groupsFiles,
  '003_sessions': sessions,
  '004_events_webhooks': eventsWebhooks,
  '005_list_indexes': listIndexes,
  '006_contact_label_order': contactLabelOrder,
  '007_event_resource_order': eventResourceOrder,
  '008_drop_events_age': dropEventsAge,
  '009_blob_purges': blobPurges,
  '010_settings': settings,
  '011_source_types': sourceTypes,
  '012_contact_sync': contactSync,
  '013_contact_search': contactSearch,
  '014_search_prefixes': searchPrefixes,
  '015_contact_email_domains': contactEmailDomains,
  '016_event_actors': eventActors,
  '017_request_log': requestLog,
  '018_event_system_actor': eventSystemActor,
};

/** Every migration's name, oldest first (the upgrade test builds a database at each). */
export const MIGRATION_NAMES: readonly string[] = Object.keys(migrations);

const provider: MigrationProvider = { getMigrations: () => Promise.resolve(migrations) };

export function migrator(db: Db): Migrator {
  // Name the schema when there is one: otherwise Kysely may see another schema's migration tables.
  return new Migrator({ db: db.kysely, provider, ...(db.pgSchema ? { migrationTableSchema: db.pgSchema } : {}) });
}

/** Applies every pending migration; throws with the failing migration's name on error. */
export async function migrateToLatest(db: Db): Promise<string[]> {
  const { error, results } = await migrator(db).migrateToLatest();
  if (error) {
    // Waiting too long for the write lock or losing the server is not the migration's fault: say so.
    if (isStatementTimeout(error) || isConnectionLost(error)) throw error;
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`migration ${failed} failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** Whether every known migration has been applied (for /readyz). */
export async function migrationsApplied(db: Db): Promise<boolean> {
  const list = await migrator(db).getMigrations();
  return list.every((m) => m.executedAt !== undefined);
}

/** Unique or primary-key violation, on either database. */
export function isUniqueViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '23505' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** Foreign-key violation (a referenced row vanished meanwhile), on either database. */
export function isForeignKeyViolation(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '23503' || code === 'SQLITE_CONSTRAINT_FOREIGNKEY';
}

/** PostgreSQL refusing a character it cannot store (NUL, invalid UTF-8). */
export function isEncodingError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '22021' || code === '22P05';
}

/**
 * The database did not answer in time: PostgreSQL cancelled a statement that ran past
 * DATABASE_STATEMENT_TIMEOUT_MS (or a lock wait), or SQLite's write lock stayed taken past its
 * busy timeout.
 */
export function isStatementTimeout(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const code = (error as { code?: unknown }).code;
  return code === '57014' || (typeof code === 'string' && code.startsWith('SQLITE_BUSY'));
}

// SQLSTATE classes 08 (connection exception) and 57P (operator intervention: terminated by
// pg_terminate_backend, server shutting down or starting), and too many connections.
const LOST_SQLSTATE = /^(08...|57P0[1-5]|53300)$/;
const LOST_SOCKET = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);
// What node-postgres says when a connection ends, cannot start, or a query passes query_timeout.
const LOST_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Query read timeout|Client has encountered a connection error|Client was closed and is not queryable)/;

/**
 * PostgreSQL cannot be reached, or the connection a statement ran on was lost: nothing of an
 * unfinished transaction was committed (PostgreSQL rolls it back with the connection). Worth a
 * retry shortly; the pool opens new connections once the server answers again.
 */
export function isConnectionLost(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, message } = error as { code?: unknown; message?: unknown };
  if (typeof code === 'string' && (LOST_SQLSTATE.test(code) || LOST_SOCKET.has(code))) return true;
  if (error instanceof AggregateError) return error.errors.some(isConnectionLost);
  return typeof message === 'string' && LOST_MESSAGE.test(message);
}
