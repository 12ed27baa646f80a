import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { directSqlite, sqliteConnectionOf, sqliteTransactions } from '../src/db/database.js';
import { inTransaction } from '../src/db/transaction.js';
import { scratchSqlite } from './helpers/scratchSqlite.js';

/**
 * SQLite's transactions without Kysely's TransactionBuilder (src/db/sqliteTransactions.ts, issue
 * 46): one transaction object, one lock shared with every query Kysely runs and with Kysely's own
 * transactions. What must hold is what held before: one transaction at a time, a query outside
 * waits for the transaction and never sees its uncommitted rows, a failure (of the work or of
 * COMMIT) rolls back and frees the connection, and a transaction's object is of no use once it
 * has ended.
 */
describe('sqlite: transactions on the one connection', () => {
  const scratch = scratchSqlite('orgdata-trx-');
  const { names, addOrg } = scratch;
  const deferred = () => {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  };

  it('runs every inTransaction on the runner, one at a time, with outside queries waiting for the commit', async () => {
    // The runner, not Kysely's TransactionBuilder (whose transactions are adopted, not its own).
    expect(sqliteTransactions(scratch.db.kysely)).toBeDefined();
    const order: string[] = [];
    const held = deferred();
    const first = inTransaction(scratch.db.kysely, async (trx) => {
      expect(directSqlite(trx)?.transaction?.open).toBe(true);
      await addOrg(trx, 'a');
      order.push('first wrote');
      await held.promise;
      order.push('first done');
    });
    const second = inTransaction(scratch.db.kysely, async (trx) => {
      order.push('second began');
      await addOrg(trx, 'b');
    });
    // A query outside both: it waits for the connection (after the second, which asked first)
    // rather than read the first's uncommitted row.
    const outside = names().then((seen) => {
      order.push('outside read');
      return seen;
    });
    // Nor may a direct statement run on the connection while the transaction holds it.
    expect(directSqlite(scratch.db.kysely)).toBeUndefined();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(order).toEqual(['first wrote']);
    held.resolve();
    await Promise.all([first, second]);
    expect(await outside).toEqual(['a', 'b']);
    expect(order).toEqual(['first wrote', 'first done', 'second began', 'outside read']);
    expect(await names()).toEqual(['a', 'b']);
    expect(sqliteConnectionOf(scratch.db.kysely)!.sqlite.inTransaction).toBe(false);
  });

  it('takes turns with Kysely’s own transactions (the migrations’ and identity code’s db.transaction())', async () => {
    const held = deferred();
    const order: string[] = [];
    const ours = inTransaction(scratch.db.kysely, async (trx) => {
      await addOrg(trx, 'ours');
      await held.promise;
      order.push('ours done');
    });
    const kyselys = scratch.db.kysely.transaction().execute(async (trx) => {
      order.push('kysely began');
      expect(await trx.selectFrom('orgs').select('name').execute()).toEqual([{ name: 'ours' }]);
      await addOrg(trx, 'kysely');
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(order).toEqual([]);
    held.resolve();
    await Promise.all([ours, kyselys]);
    expect(order).toEqual(['ours done', 'kysely began']);
    expect(await names()).toEqual(['kysely', 'ours']);
  });

  it('rolls back when the work throws, and frees the connection for the next', async () => {
    await expect(
      inTransaction(scratch.db.kysely, async (trx) => {
        await addOrg(trx, 'doomed');
        throw new Error('refused');
      }),
    ).rejects.toThrow('refused');
    expect(sqliteConnectionOf(scratch.db.kysely)!.sqlite.inTransaction).toBe(false);
    expect(await names()).toEqual([]);
    await inTransaction(scratch.db.kysely, (trx) => addOrg(trx, 'next'));
    expect(await names()).toEqual(['next']);
  });

  it('rolls back when COMMIT itself fails (a deferred foreign key), and frees the connection', async () => {
    await expect(
      inTransaction(scratch.db.kysely, async (trx) => {
        await addOrg(trx, 'kept-out');
        await sql`pragma defer_foreign_keys = on`.execute(trx);
        // A contact of an organisation that does not exist: refused only at COMMIT.
        await sql`insert into contacts (id, org_id, first_name, last_name, email, email_lower, source_type, metadata, search_text, created_at, updated_at)
                  values ('con_orphan', 'org_missing', 'A', '', 'a@example.com', 'a@example.com', 'api', '{}', '', '2026-11-27T00:00:00.000Z', '2026-11-27T00:00:00.000Z')`.execute(
          trx,
        );
      }),
    ).rejects.toThrow(/FOREIGN KEY/);
    expect(sqliteConnectionOf(scratch.db.kysely)!.sqlite.inTransaction).toBe(false);
    expect(await names()).toEqual([]);
    await inTransaction(scratch.db.kysely, (trx) => addOrg(trx, 'after'));
    expect(await names()).toEqual(['after']);
  });

  it('refuses a transaction object used after its transaction ended, through Kysely and directly', async () => {
    const kept = await inTransaction(scratch.db.kysely, async (trx) => {
      await addOrg(trx, 'one');
      return trx;
    });
    await expect(addOrg(kept, 'late')).rejects.toThrow(/transaction has ended/);
    expect(directSqlite(kept)).toBeUndefined();
    // Nor inside the next transaction, which it did not open.
    const held = deferred();
    const next = inTransaction(scratch.db.kysely, async (trx) => {
      expect(trx).not.toBe(kept);
      expect(directSqlite(trx)).toBeDefined();
      await addOrg(trx, 'two');
      await held.promise;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await expect(addOrg(kept, 'inside')).rejects.toThrow(/transaction has ended/);
    expect(directSqlite(kept)).toBeUndefined();
    held.resolve();
    await next;
    expect(await names()).toEqual(['one', 'two']);
  });
});
