import { existsSync, mkdirSync } from 'node:fs';
import { ConfigError } from '../config.js';
import path from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, type Migration, type MigrationProvider } from 'kysely';
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
import * as contactEmailNfc from './migrations/019_contact_email_nfc.js';
import * as invitationsPasswordResets from './migrations/020_invitations_password_resets.js';
import * as signInFactors from './migrations/021_sign_in_factors.js';
import * as ssoTrust from './migrations/022_sso_trust.js';
import * as ssoDomainVerification from './migrations/023_sso_domain_verification.js';
import * as boundedSignIn from './migrations/025_bounded_sign_in.js';
import * as ssoLinksConsent from './migrations/026_sso_links_consent.js';
import * as sandbox from './migrations/027_sandbox.js';
import * as sessionTestMode from './migrations/028_session_test_mode.js';
import { isConnectionLost, isStatementTimeout } from './errors.js';
import { openPostgres, type PoolStats } from './postgres.js';
import { ownTables, withIntrospector } from './migrationIntrospector.js';
import type { Database } from './schema.js';
import { ImmediateSqliteDialect, sqliteTransactionsOf, type SqliteTransaction, type SqliteTransactions } from './sqliteTransactions.js';

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
  /** PostgreSQL only: `transaction` behind a transaction pooler (see Config.databasePoolMode). */
  poolMode?: 'session' | 'transaction';
  /**
   * SQLite only: refuse to create the database file when there is none (every CLI command but
   * `serve` and `migrate`: a command pointed at the wrong DATA_DIR must say so, not start afresh).
   */
  mustExist?: boolean;
}

export function openDatabase(options: DatabaseOptions): Db {
  if (options.databaseUrl) {
    const { kysely, poolStats } = openPostgres({ ...options, databaseUrl: options.databaseUrl });
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
  const dialect = new ImmediateSqliteDialect({ database: statements });
  const kysely = new Kysely<Database>({ dialect });
  direct.set(kysely, { sqlite, prepare: statements.prepare });
  runners.set(kysely, { sqlite, prepare: statements.prepare, dialect, runner: undefined });
  return { kysely, dialect: 'sqlite', poolStats: () => null, close: () => kysely.destroy() };
}

/** The SQLite connection behind a database opened here, for reads that skip Kysely's executor. */
export interface DirectSqlite {
  sqlite: SQLite.Database;
  prepare(text: string): SQLite.Statement;
  /** For a transaction of SqliteTransactions: it, which says whether it is still open. */
  transaction?: SqliteTransaction;
}

const direct = new WeakMap<Kysely<Database>, DirectSqlite>();
const runners = new WeakMap<
  Kysely<Database>,
  {
    sqlite: SQLite.Database;
    prepare(text: string): SQLite.Statement;
    dialect: ImmediateSqliteDialect;
    runner: SqliteTransactions | undefined;
  }
>();

/**
 * The transaction runner of a SQLite database opened here (see SqliteTransactions), once Kysely
 * has opened its connection; undefined on PostgreSQL and before the first query. Not made once the
 * connection is closed (making it prepares statements, which would throw where inTransaction is
 * called rather than reject): Kysely's path then rejects, as it did before the runner.
 */
export function sqliteTransactions(db: Kysely<Database>): SqliteTransactions | undefined {
  const entry = runners.get(db);
  if (!entry) return undefined;
  if (!entry.runner && entry.sqlite.open) {
    const { sqlite, prepare } = entry;
    entry.runner = sqliteTransactionsOf(db, sqlite, entry.dialect, (transaction) =>
      direct.set(transaction.trx, { sqlite, prepare, transaction }),
    );
  }
  return entry.runner;
}

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
  // A transaction of SqliteTransactions: while it is open (a flag, where asking the connection
  // is a call into better-sqlite3 for every statement).
  if (found.transaction) return found.transaction.open ? found : undefined;
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
        statement = sqlite.prepare(stableStatementText(text));
        statements.set(text, statement);
      }
      return statement;
    },
  };
}

/**
 * The SQL SQLite is given for `text`: each bare `limit ?`, `like ?` and `glob ?` written
 * `limit +?`, `like +?` and `glob +?` (outside quotes and comments), the same values (a unary plus
 * is a no-op in SQLite, on text as on numbers; a limit that is not an integer is refused as before).
 *
 * Why: SQLite's planner (3.53, better-sqlite3's) reads the value bound to a bare `LIMIT ?`
 * (sqlite3ExprIsInteger, to size the result) or to the pattern of a `LIKE ?` (isLikeOrGlob, for a prefix's index range)
 * while it prepares the statement, and so marks the statement to be prepared again whenever that
 * parameter is bound anew. better-sqlite3 binds every parameter on every run, so each run of a
 * cached statement with `LIMIT ?` was parsed and planned from scratch: under callgrind
 * (`BENCH_KEEP=1 BENCH_TARGETS=list-25 npx tsx bench/budget.ts`, then `callgrind_annotate
 * --tree=caller` on sqlite3Reprepare) once a request, 250,000 instructions of list-25's 1.73
 * million. The planner does not read `+?` (only a bare parameter), so the statement
 * is prepared once and its plan does not depend on the page size (`npm run bench:scale` checks
 * every list's plan with this same text). No `LIKE` here can use an index range (each is on an
 * expression, or its pattern begins with `%`). Kysely binds even a literal `.limit(1)`, so this is
 * done here, once per statement text, rather than at each call. (`SQLITE_DBCONFIG_ENABLE_QPSG` would
 * stop every re-prepare on bound values, but better-sqlite3 does not expose sqlite3_db_config.)
 */
export function stableStatementText(text: string): string {
  return text.replace(STATEMENT_PARTS, (part, keyword?: string, space?: string, first?: string, comma?: string, second?: string) =>
    keyword === undefined ? part : `${keyword}${space}+${first}${comma === undefined ? '' : `${comma}+${second}`}`,
  );
}

/**
 * What stableStatementText reads: a quoted string or name, or a comment, kept as it is (so a
 * `'limit ?'` inside a literal is not touched); else `limit ?` (and `limit ?, ?`, whose first value
 * is the offset), `like ?` or `glob ?` (the planner reads a GLOB pattern as it reads a LIKE's), a
 * parameter `?` or `?NNN`, whatever the case and the white space between them.
 */
const STATEMENT_PARTS =
  /'(?:[^']|'')*'|"(?:[^"]|"")*"|`(?:[^`]|``)*`|\[[^\]]*\]|--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)|\b(limit|like|glob)(\s+)(\?\d*)(?![\w$])(?:(\s*,\s*)(\?\d*)(?![\w$]))?/gi;

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
  '019_contact_email_nfc': contactEmailNfc,
  '020_invitations_password_resets': invitationsPasswordResets,
  '021_sign_in_factors': signInFactors,
  '022_sso_trust': ssoTrust,
  '023_sso_domain_verification': ssoDomainVerification,
  '025_bounded_sign_in': boundedSignIn,
  '026_sso_links_consent': ssoLinksConsent,
  '027_sandbox': sandbox,
  '028_session_test_mode': sessionTestMode,
};

/** Every migration's name, oldest first (the upgrade test builds a database at each). */
export const MIGRATION_NAMES: readonly string[] = Object.keys(migrations);

const provider: MigrationProvider = { getMigrations: () => Promise.resolve(migrations) };

export function migrator(db: Db): Migrator {
  // Name the schema when there is one: otherwise Kysely may see another schema's migration tables.
  const kysely = db.dialect === 'postgres' ? withIntrospector(db.kysely, ownTables(db.kysely, db.pgSchema)) : db.kysely;
  return new Migrator({ db: kysely, provider, ...(db.pgSchema ? { migrationTableSchema: db.pgSchema } : {}) });
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
