import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest, openDatabase, sqliteConnectionOf, stableStatementText, type Db } from '../src/db/database.js';

// SQLite re-prepares a statement on every run when its plan read a bound value: a bare `LIMIT ?`
// (SQLite 3.53, better-sqlite3's) or the pattern of `LIKE ?`. The statement cache (src/db/database.ts) hands SQLite
// `LIMIT +?` and `LIKE +?` instead, which it does not read, with the same results. How much it
// saves is counted by `npm run bench:check` (list-25 re-prepared its page statement each request).

describe('SQL as SQLite prepares it', () => {
  let db: Db;
  beforeAll(async () => {
    db = openDatabase({ databaseUrl: null, dataDir: ':memory:' });
    await migrateToLatest(db);
    await sql`create table words (n integer primary key, word text not null)`.execute(db.kysely);
    for (const [n, word] of ['apple', 'apricot', 'banana', 'cherry', '50%_off'].entries())
      await sql`insert into words (n, word) values (${n}, ${word})`.execute(db.kysely);
  });
  afterAll(() => db.close());

  it('writes every bare limit and like parameter with a unary plus, and nothing else', () => {
    expect(stableStatementText('select "id" from "t" where "a" like ? escape \'\\\' order by "id" limit ? offset ?')).toBe(
      'select "id" from "t" where "a" like +? escape \'\\\' order by "id" limit +? offset ?',
    );
    expect(stableStatementText('SELECT x FROM t WHERE y NOT LIKE ? LIMIT ?')).toBe('SELECT x FROM t WHERE y NOT LIKE +? LIMIT +?');
    expect(stableStatementText('select "limit", "unlike" from t where a = ? limit 5')).toBe(
      'select "limit", "unlike" from t where a = ? limit 5',
    );
    expect(stableStatementText('select * from t limit +?')).toBe('select * from t limit +?');
  });

  it('reads the SQL as SQLite does: quotes and comments kept, any spacing, GLOB, ?NNN and LIMIT a, b', () => {
    const kept = [
      `select 'limit ?' as a, "like ?" as b, [glob ?] as c, \`limit ?\` as d from t limit 5`,
      `select 'it''s like ?' from t -- limit ?\nlimit 1`,
      'select x from t /* where y like ? */ limit 2',
      'select x from t where y like ?x', // not a parameter SQLite knows; left for SQLite to refuse
      'select x from t where y = ? and z = ? offset ?',
    ];
    for (const text of kept) expect(stableStatementText(text)).toBe(text);
    expect(stableStatementText('select x from t where y glob ?  limit\n  ?')).toBe('select x from t where y glob +?  limit\n  +?');
    expect(stableStatementText('select x from t where y like ?2 limit ?1')).toBe('select x from t where y like +?2 limit +?1');
    expect(stableStatementText('select x from t limit ? , ?')).toBe('select x from t limit +? , +?');
    expect(stableStatementText("select 'a' from t where y like ? and z = 'limit ?' limit ?")).toBe(
      "select 'a' from t where y like +? and z = 'limit ?' limit +?",
    );
  });

  it('is the text the statement cache hands SQLite for what Kysely writes', () => {
    const direct = sqliteConnectionOf(db.kysely)!;
    const query = db.kysely
      .selectFrom('words' as never)
      .select('n' as never)
      .limit(2)
      .compile();
    expect(query.sql).toMatch(/limit \?$/); // what Kysely writes
    expect(direct.prepare(query.sql).source).toMatch(/limit \+\?$/); // what SQLite is given
  });

  it('keeps the limits and patterns meaning what they meant', async () => {
    const words = (rows: { word: string }[]) => rows.map((r) => r.word);
    const limited = (n: unknown) => sql<{ word: string }>`select word from words order by n limit ${n}`.execute(db.kysely);
    expect(words((await limited(2)).rows)).toEqual(['apple', 'apricot']);
    expect(words((await limited(0)).rows)).toEqual([]);
    expect(words((await limited(-1)).rows)).toHaveLength(5); // SQLite: a negative limit is none
    await expect(limited('two')).rejects.toThrow(/datatype mismatch/);
    // The same statement, rebound: each run reads its own limit (the plan does not hold the first).
    expect(words((await limited(3)).rows)).toEqual(['apple', 'apricot', 'banana']);
    const like = (pattern: string) =>
      sql<{ word: string }>`select word from words where word like ${pattern} escape '\\' order by n`.execute(db.kysely);
    expect(words((await like('ap%')).rows)).toEqual(['apple', 'apricot']);
    expect(words((await like('AP%')).rows)).toEqual(['apple', 'apricot']); // still case-insensitive
    expect(words((await like('%\\%\\_%')).rows)).toEqual(['50%_off']);
    expect(words((await like('%an%')).rows)).toEqual(['banana']);
    const globbed = await sql<{ word: string }>`select word from words where word glob ${'ap*'} order by n`.execute(db.kysely);
    expect(words(globbed.rows)).toEqual(['apple', 'apricot']); // GLOB stays case-sensitive
    expect(words((await sql<{ word: string }>`select word from words where word glob ${'AP*'}`.execute(db.kysely)).rows)).toEqual([]);
    // LIMIT offset, count: both rewritten, both still read.
    const paged = await sql<{ word: string }>`select word from words order by n limit ${1}, ${2}`.execute(db.kysely);
    expect(words(paged.rows)).toEqual(['apricot', 'banana']);
  });
});
