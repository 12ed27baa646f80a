import { Kysely, PostgresDialect, type PostgresPool, type PostgresPoolClient } from 'kysely';
import pg from 'pg';
import { isConnectionLost } from './errors.js';
import { postgresTarget, tlsFailure, tlsFor } from './postgresTls.js';
import type { Database } from './schema.js';

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

/** PostgreSQL's side of openDatabase (see DatabaseOptions): the pool, its deadlines, and its named statements. */
export function openPostgres(options: {
  databaseUrl: string;
  poolSize?: number;
  statementTimeoutMs?: number;
  pgSchema?: string;
  poolMode?: 'session' | 'transaction';
}): {
  kysely: Kysely<Database>;
  poolStats: () => PoolStats;
} {
  // The URL's TLS parameters are read as libpq reads them (postgresTls.ts), not by node-postgres.
  const target = postgresTarget(options.databaseUrl);
  // Behind a transaction pooler each transaction may run on another server connection: nothing
  // may outlive one (named statements, SET, startup parameters, which PgBouncer refuses anyway).
  // The server-side statement timeout is then set per transaction, in BEGIN's round trip; a
  // statement outside a transaction has the client's deadline, and the role's default when the
  // operator sets one (docs/scale-out.md, "Managed services").
  const pooled = options.poolMode === 'transaction';
  const timeout = options.statementTimeoutMs;
  const pool = new pg.Pool({
    connectionString: target.connectionString,
    ssl: target.tls,
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
    ...(timeout ? { query_timeout: timeout + 2000, ...(pooled ? {} : { statement_timeout: timeout }) } : {}),
    ...(options.pgSchema ? { options: `-c search_path=${options.pgSchema}` } : {}),
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  // With sslmode=prefer, whether the server offers TLS is asked before the first connection.
  let tlsDecided: Promise<void> | null = null;
  const beforeConnect = () =>
    (tlsDecided ??= tlsFor(target).then(
      (ssl) => void (pool.options.ssl = ssl),
      (error: unknown) => {
        tlsDecided = null;
        throw error;
      },
    ));
  const explain = (error: unknown) => tlsFailure(error, target) ?? error;
  const kysely = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: withNamedStatements(pool, { beforeConnect, explain, pooled, timeout }) }),
  });
  const max = options.poolSize ?? 10;
  const poolStats = () => ({ max, inUse: pool.totalCount - pool.idleCount, idle: pool.idleCount, waiting: pool.waitingCount });
  return { kysely, poolStats };
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
interface ConnectOptions {
  beforeConnect: () => Promise<void>;
  explain: (error: unknown) => unknown;
  /** Behind a transaction pooler: statements unnamed, the statement timeout set with each BEGIN. */
  pooled: boolean;
  timeout: number | undefined;
}

const BEGIN = /^(begin|start transaction)\b/i;

function withNamedStatements(pool: pg.Pool, { beforeConnect, explain, pooled, timeout }: ConnectOptions): PostgresPool {
  const wrapped = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  return {
    async connect() {
      let client: pg.PoolClient;
      try {
        await beforeConnect();
        client = await pool.connect();
      } catch (error) {
        // A certificate for another host or from another CA says so, rather than a bare TLS code.
        throw explain(error);
      }
      let wrapper = wrapped.get(client);
      if (!wrapper) {
        let lost: unknown;
        // The pool listens for errors only on idle clients: a connection lost while checked out
        // (between a transaction's queries) emits an 'error' nobody hears, which ends the process.
        client.on('error', (error) => (lost ??= error));
        const send = (text: unknown, values?: unknown[]) => {
          if (pooled && timeout && typeof text === 'string' && BEGIN.test(text) && !values?.length) {
            // One simple query, one round trip: BEGIN and the transaction's statement timeout.
            return client.query(`${text}; set local statement_timeout = ${Math.floor(timeout)}`);
          }
          const name = !pooled && typeof text === 'string' ? statementNames.get(text) : undefined;
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
