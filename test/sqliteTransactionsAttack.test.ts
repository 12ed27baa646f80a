import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { directSqlite, openDatabase, sqliteConnectionOf } from '../src/db/database.js';
import { inRetriedTransaction, inTransaction } from '../src/db/transaction.js';
import { scratchSqlite } from './helpers/scratchSqlite.js';

/**
 * Attacks on SQLite's transactions (src/db/sqliteTransactions.ts, issue 46) that Kysely's
 * TransactionBuilder withstood: each pins what held before the runner.
 */
describe('sqlite: transactions under attack', () => {
  const scratch = scratchSqlite('orgdata-trx-attack-');
  const { names, addOrg } = scratch;
  const inTxn = () => sqliteConnectionOf(scratch.db.kysely)!.sqlite.inTransaction;

  it('keeps what came before a refused statement when the work goes on, and nothing when it then throws', async () => {
    await inTransaction(scratch.db.kysely, async (trx) => {
      await addOrg(trx, 'a');
      // SQLite undoes only the refused statement; the transaction stays open.
      await expect(addOrg(trx, 'a')).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
      await addOrg(trx, 'b');
    });
    expect(await names()).toEqual(['a', 'b']);
    await expect(
      inTransaction(scratch.db.kysely, async (trx) => {
        await addOrg(trx, 'c');
        await addOrg(trx, 'a'); // refused: the work throws it
      }),
    ).rejects.toMatchObject({ code: 'SQLITE_CONSTRAINT_PRIMARYKEY' });
    expect(inTxn()).toBe(false);
    expect(await names()).toEqual(['a', 'b']);
  });

  it('rolls back and frees the connection when the work throws synchronously, and commits work that never awaits', async () => {
    const sync = (() => {
      throw new Error('at once');
    }) as unknown as (trx: typeof scratch.db.kysely) => Promise<void>;
    await expect(inTransaction(scratch.db.kysely, sync)).rejects.toThrow('at once');
    expect(inTxn()).toBe(false);
    // Not awaited inside, yet issued while the transaction is open: it is the transaction's.
    await inTransaction(scratch.db.kysely, (trx) => {
      void addOrg(trx, 'unawaited');
      return Promise.resolve();
    });
    expect(await names()).toEqual(['unawaited']);
    expect(directSqlite(scratch.db.kysely)).toBeDefined();
  });

  it('joins a caller’s transaction (nested inTransaction, inRetriedTransaction): one commit, one rollback', async () => {
    await expect(
      inTransaction(scratch.db.kysely, async (trx) => {
        await addOrg(trx, 'outer');
        await inTransaction(trx, (inner) => addOrg(inner, 'inner'));
        await inRetriedTransaction(trx, async (inner) => {
          await addOrg(inner, 'retried');
          throw new Error('inner refused');
        });
      }),
    ).rejects.toThrow('inner refused');
    expect(inTxn()).toBe(false);
    expect(await names()).toEqual([]);
    await inRetriedTransaction(scratch.db.kysely, async (trx) => {
      await addOrg(trx, 'outer');
      await inTransaction(trx, (inner) => addOrg(inner, 'inner'));
    });
    expect(await names()).toEqual(['inner', 'outer']);
  });

  it('never runs a stale transaction’s query after its rollback (a query still pending when the work threw)', async () => {
    let late: Promise<unknown> | undefined;
    await expect(
      inTransaction(scratch.db.kysely, async (trx) => {
        await addOrg(trx, 'first');
        late = (async () => {
          await new Promise((resolve) => setTimeout(resolve, 20));
          return addOrg(trx, 'late');
        })();
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    await expect(late).rejects.toThrow();
    expect(await names()).toEqual([]);
  });

  it('rolls back a transaction whose COMMIT is refused when SQLite had already ended it', async () => {
    // A ROLLBACK sent by the work itself: SQLite ends the transaction; COMMIT then fails
    // ("no transaction is active"), and what the work did after runs on no transaction at all.
    await expect(
      inTransaction(scratch.db.kysely, async (trx) => {
        await addOrg(trx, 'before');
        await sql`rollback`.execute(trx);
      }),
    ).rejects.toThrow(/no transaction is active/);
    expect(inTxn()).toBe(false);
    await inTransaction(scratch.db.kysely, (trx) => addOrg(trx, 'next'));
    expect(await names()).toEqual(['next']);
  });

  it('the first transaction, before Kysely has opened its connection, and the next take turns; outside reads wait', async () => {
    await scratch.db.close();
    scratch.db = openDatabase({ databaseUrl: null, dataDir: scratch.dir });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const order: string[] = [];
    // No query yet: this one goes through Kysely's TransactionBuilder.
    const first = inTransaction(scratch.db.kysely, async (trx) => {
      await addOrg(trx, 'first');
      order.push('first wrote');
      await held;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(inTxn()).toBe(true);
    // Kysely's connection is open now: this one is the runner's, and waits.
    const second = inTransaction(scratch.db.kysely, async (trx) => {
      order.push('second began');
      await addOrg(trx, 'second');
    });
    const outside = names();
    expect(directSqlite(scratch.db.kysely)).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(order).toEqual(['first wrote']);
    release();
    await Promise.all([first, second]);
    expect(order).toEqual(['first wrote', 'second began']);
    expect(await outside).toEqual(['first', 'second']);
    expect(inTxn()).toBe(false);
  });

  it('closing the database while one transaction runs and another waits ends both with an error, and hangs nothing', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const running = inTransaction(scratch.db.kysely, async (trx) => {
      await addOrg(trx, 'running');
      await held;
      await addOrg(trx, 'after-close');
    });
    const waiting = inTransaction(scratch.db.kysely, (trx) => addOrg(trx, 'waiting'));
    const query = names();
    await new Promise((resolve) => setTimeout(resolve, 20));
    await scratch.db.close();
    release();
    const outcomes = await Promise.allSettled([running, waiting, query]);
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    // And later transactions fail at once rather than wait.
    await expect(inTransaction(scratch.db.kysely, (trx) => addOrg(trx, 'later'))).rejects.toThrow();
    // Nothing of the interrupted transaction reached the file.
    const again = openDatabase({ databaseUrl: null, dataDir: scratch.dir });
    try {
      expect((await again.kysely.selectFrom('orgs').select('name').execute()).map((r) => r.name)).toEqual([]);
    } finally {
      await again.close();
    }
  });

  it('after the database is closed, inTransaction rejects rather than throw where it is called', async () => {
    // Kysely's connection open (a query ran) but no transaction yet: no runner made before the close.
    await names();
    await scratch.db.close();
    let thrown: unknown;
    let result: Promise<unknown> | undefined;
    try {
      result = inTransaction(scratch.db.kysely, (trx) => addOrg(trx, 'closed'));
    } catch (error) {
      thrown = error;
    }
    // A caller's `.catch()` (the housekeeping's) must see it: a throw would pass it by.
    expect(thrown).toBeUndefined();
    await expect(result).rejects.toThrow();
  });
});
