import type SQLite from 'better-sqlite3';
import {
  CompiledQuery,
  SqliteDialect,
  SqliteDriver,
  Transaction,
  type ConnectionProvider,
  type DatabaseConnection,
  type Driver,
  type Kysely,
  type SqliteDialectConfig,
} from 'kysely';
import type { Database } from './schema.js';

/**
 * The lock on SQLite's one connection: whoever holds it runs statements on it (a Kysely query, a
 * transaction from BEGIN to COMMIT). Taken at once, without a promise, when it is free; else
 * handed on in the order it was asked for.
 */
class ConnectionLock {
  #held = false;
  readonly #waiting: (() => void)[] = [];

  /** Takes the lock: undefined when it was free, else a promise that resolves once it is this caller's. */
  take(): Promise<void> | undefined {
    if (!this.#held) {
      this.#held = true;
      return undefined;
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  release(): void {
    const next = this.#waiting.shift();
    if (next)
      next(); // handed on: still held
    else this.#held = false;
  }
}

/**
 * Kysely's SQLite driver with two changes:
 * - every transaction Kysely opens begins with `BEGIN IMMEDIATE`: it takes the write lock at once,
 *   waiting up to busy_timeout for another process (the CLI beside a running server, two CLI runs)
 *   to finish. Kysely's `BEGIN` is deferred: a transaction that reads and then writes while another
 *   process writes fails with SQLITE_BUSY at its first write without waiting, since SQLite cannot
 *   upgrade a read snapshot that is no longer the newest. Within one process the one connection
 *   runs one transaction at a time already, so nothing is lost by taking the lock early.
 * - the connection is handed out under `lock`, ours, which SqliteTransactions takes too. Kysely's
 *   own driver guards its connection with a mutex of its own; this driver takes that one once, at
 *   init, and keeps it.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  readonly lock = new ConnectionLock();
  connection: DatabaseConnection | undefined;

  override async init(): Promise<void> {
    await super.init();
    this.connection = await super.acquireConnection();
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const waiting = this.lock.take();
    if (waiting) await waiting;
    return this.connection!;
  }

  override async releaseConnection(): Promise<void> {
    this.lock.release();
  }

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

/** SQLite's dialect with ImmediateSqliteDriver; `driver` is the one Kysely made (it makes one). */
export class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;
  driver: ImmediateSqliteDriver | undefined;

  constructor(config: SqliteDialectConfig) {
    super(config);
    this.#config = config;
  }

  override createDriver(): Driver {
    this.driver = new ImmediateSqliteDriver(this.#config);
    return this.driver;
  }
}

/** A transaction of SqliteTransactions: its Kysely object, and whether it is still open. */
export interface SqliteTransaction {
  trx: Kysely<Database>;
  open: boolean;
}

/**
 * Transactions on SQLite's one connection without Kysely's TransactionBuilder, which for each
 * transaction compiles BEGIN and COMMIT, makes an asserting executor and a connection provider,
 * and awaits its way through the runtime driver's layers: 40,000–63,000 instructions a create
 * (`npm run bench:ladder`, the transaction rung). Here BEGIN IMMEDIATE, COMMIT and ROLLBACK are
 * statements prepared once, and each transaction gets a Kysely object of its own whose queries
 * run on the connection only while that transaction is open (once it has ended they throw, as
 * Kysely's own do once committed; `onOpen` lets directSqlite know the object). Exclusion is the
 * driver's lock, which Kysely's queries and its own transactions (the migrations, the identity
 * code's `db.transaction()`) take as well.
 */
export class SqliteTransactions {
  readonly #executor: ReturnType<Kysely<Database>['getExecutor']>;
  readonly #begin: SQLite.Statement;
  readonly #commit: SQLite.Statement;
  readonly #rollback: SQLite.Statement;

  constructor(
    db: Kysely<Database>,
    private readonly driver: ImmediateSqliteDriver,
    private readonly sqlite: SQLite.Database,
    private readonly dialect: ImmediateSqliteDialect,
    private readonly onOpen: (transaction: SqliteTransaction) => void,
  ) {
    this.#executor = db.getExecutor();
    this.#begin = sqlite.prepare('begin immediate');
    this.#commit = sqlite.prepare('commit');
    this.#rollback = sqlite.prepare('rollback');
  }

  /** Runs `work` in a transaction (BEGIN IMMEDIATE … COMMIT, ROLLBACK when it throws), one at a time. */
  async run<T>(work: (trx: Kysely<Database>) => Promise<T>): Promise<T> {
    const waiting = this.driver.lock.take();
    if (waiting) await waiting;
    try {
      this.#begin.run();
      const connection = this.driver.connection!;
      const transaction: SqliteTransaction = { trx: undefined as never, open: true };
      const provider: ConnectionProvider = {
        provideConnection: async (consumer) => {
          if (!transaction.open) throw new Error('this transaction has ended: its queries can no longer run');
          return consumer(connection);
        },
      };
      const { driver, dialect } = this;
      transaction.trx = new Transaction<Database>({
        config: { dialect },
        driver,
        dialect,
        executor: this.#executor.withConnectionProvider(provider),
      });
      this.onOpen(transaction);
      try {
        const result = await work(transaction.trx);
        this.#commit.run();
        return result;
      } catch (error) {
        // A failed COMMIT (a deferred constraint) leaves the transaction open, as a failed statement does.
        if (this.sqlite.inTransaction) this.#rollback.run();
        throw error;
      } finally {
        transaction.open = false;
      }
    } finally {
      this.driver.lock.release();
    }
  }
}

/** The runner of `db`'s dialect once Kysely has opened its connection (its first query); until then, none. */
export function sqliteTransactionsOf(
  db: Kysely<Database>,
  sqlite: SQLite.Database,
  dialect: ImmediateSqliteDialect,
  onOpen: (transaction: SqliteTransaction) => void,
): SqliteTransactions | undefined {
  const driver = dialect.driver;
  return driver?.connection ? new SqliteTransactions(db, driver, sqlite, dialect, onOpen) : undefined;
}
