import { PostgresAdapter, type CompiledQuery, type Compilable, type Kysely } from 'kysely';
import type { Database } from './schema.js';
import { directSqlite } from './database.js';
import { prepareOnPostgres } from './postgres.js';

/** Stands for the `index`th value of `execute`; typed as whatever the builder wants there. */
export type Slot = <T>(index: number) => T;

interface Compiled {
  query: CompiledQuery;
  /** For each parameter of the SQL: the index of the value it takes, or -1 to keep the compiled one. */
  slots: number[];
  /** Every parameter is a slot, the i-th taking the i-th value: the values are the parameters as given. */
  inOrder: boolean;
}

const MARK = '\u0000slot:';

/**
 * A hot query built with Kysely once per dialect and shape, then run with new values: building and
 * compiling a query costs more than running a small one on SQLite. The builder gets a `slot(i)`
 * for each value; `shape` names a variant (which filters are on, how many ids): each distinct
 * shape is compiled once. The SQL is Kysely's own, so both dialects stay in step; values are
 * still bound, never spliced into the text.
 */
export class PreparedQuery<Row, Shape extends string | number = string> {
  private readonly byAdapter = new WeakMap<object, Map<Shape, Compiled>>();

  /**
   * `named(shape)` false: on PostgreSQL that shape is sent without a name, so it is planned for
   * its values every time (a named statement may switch to a generic plan after five runs, blind
   * to the values: wrong for a search, whose plan depends on how common its words are).
   */
  constructor(
    private readonly build: (db: Kysely<Database>, slot: Slot, shape: Shape) => Compilable<Row>,
    private readonly named: (shape: Shape) => boolean = () => true,
  ) {}

  private compiled(db: Kysely<Database>, shape: Shape): Compiled {
    // A transaction shares its database's adapter, so it shares the compiled queries too.
    const adapter = db.getExecutor().adapter;
    let shapes = this.byAdapter.get(adapter);
    if (!shapes) this.byAdapter.set(adapter, (shapes = new Map()));
    let compiled = shapes.get(shape);
    if (!compiled) {
      const slot = <T>(index: number) => `${MARK}${index}` as T;
      const query = this.build(db, slot as Slot, shape).compile();
      const slots = query.parameters.map((p) => (typeof p === 'string' && p.startsWith(MARK) ? Number(p.slice(MARK.length)) : -1));
      compiled = { query, slots, inOrder: slots.every((slot, i) => slot === i) };
      shapes.set(shape, compiled);
      if (adapter instanceof PostgresAdapter && this.named(shape)) prepareOnPostgres(query.sql);
    }
    return compiled;
  }

  /**
   * The compiled query's parameters with `values` in their slots: `values` itself when they are
   * the parameters in order (a batch's inserts bind ~2,000 values; copying them was ~950
   * instructions a contact, issue 46).
   */
  private static parameters({ query, slots, inOrder }: Compiled, values: readonly unknown[]): readonly unknown[] {
    if (inOrder && values.length === slots.length) return values;
    const parameters = new Array<unknown>(slots.length);
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i]!;
      parameters[i] = slot === -1 ? query.parameters[i] : values[slot];
    }
    return parameters;
  }

  /** Runs a query that returns rows. */
  async execute(db: Kysely<Database>, values: readonly unknown[], shape = '' as Shape): Promise<Row[]> {
    const compiled = this.compiled(db, shape);
    const parameters = PreparedQuery.parameters(compiled, values);
    const sqlite = directSqlite(db);
    if (sqlite) {
      const statement = sqlite.prepare(compiled.query.sql);
      if (statement.reader) return statement.all(parameters) as Row[];
    }
    const result = await db.executeQuery<Row>({ ...compiled.query, parameters } as CompiledQuery<Row>);
    return result.rows;
  }

  /** Runs a write (insert, update, delete without `returning`); resolves with the rows it changed. */
  async run(db: Kysely<Database>, values: readonly unknown[], shape = '' as Shape): Promise<number> {
    const compiled = this.compiled(db, shape);
    const parameters = PreparedQuery.parameters(compiled, values);
    const sqlite = directSqlite(db);
    if (sqlite) {
      const statement = sqlite.prepare(compiled.query.sql);
      if (!statement.reader) return statement.run(parameters).changes;
    }
    const result = await db.executeQuery({ ...compiled.query, parameters });
    return Number(result.numAffectedRows ?? 0);
  }
}
