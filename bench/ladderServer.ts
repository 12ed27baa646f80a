/**
 * The server of a ladder (bench/ladder.ts): one process, one Fastify app without hooks or schemas,
 * each route a rung that adds one layer of orgdata's create or batch upsert (LADDER_TARGET) on top
 * of the one below. Each rung has its own copy of the seeded data directory (bench/ladder.ts
 * seeded it), opened as the server opens it (the built app's `openDatabase`: WAL, the statement
 * cache), so every rung meets the same data at its n-th request, and makes the same changes to it.
 * Each route answers the target's status with its JSON, serialized by Fastify without a schema.
 *
 * - `POST /ladder/bare`: the body parsed, a recorded answer sent. Nothing else.
 * - `POST /ladder/raw`: plus exactly the writes the n-th request of the target makes, values and
 *   all, run on the connection between `BEGIN IMMEDIATE` and `COMMIT` through the statement cache.
 *   They are recorded before the server listens, from the domain's own function (createContact,
 *   batchContacts) sending the same n bodies on another copy of the seeded data: on a copy in the
 *   same state they are valid request by request (a batch's updates name the contacts the batch
 *   before made; its new contacts' emails and external ids are free).
 * - `POST /ladder/statements`: plus the reads and savepoints it runs too (every statement, in its
 *   order): what SQLite's side of them costs (the raw rung leaves them out, as the floor does).
 * - `POST /ladder/transaction`: the same statements inside Kysely's transaction as the domain opens
 *   it (`inTransaction`: the connection adopted, statements run directly on it).
 * - `POST /ladder/domain`: the built app's write as the route calls it without an Idempotency-Key:
 *   `createContact(ctx, body, 'api')`; `batchContacts(ctx, items, options)` with each item as the
 *   route hands it on once its schema passed. The fields checked and normalised, ids and times
 *   made, the plan's reads, the rows, search text, events and views built, the outbox read, the
 *   statements bound through PreparedQuery.
 *
 * The route above the domain (hooks: authentication, rate limits, the key guard, strict JSON,
 * body and response schemas, the error handler; idempotency, request log, metrics) is the app
 * itself, measured by bench/budget.ts (bench/ladder.ts runs it with those three off).
 *
 * Beside them, `POST /ladder/part/NAME` for each of LADDER_PARTS (a JSON list of `{ name, pattern }`):
 * raw plus only the reads and savepoints whose SQL the pattern matches, on a copy of its own.
 *
 * Environment: PORT, DATA_DIR, LADDER_TARGET (create, the default, or batch-upsert), LADDER_PARTS, LADDER_ORG,
 * LADDER_KEY_ID, LADDER_REQUESTS (how many requests of each rung to record statements for, at most
 * 10,000), LADDER_DIST (the built app's dist/).
 */
import { cpSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import Fastify from 'fastify';
import type { Kysely } from 'kysely';
import type Database from 'better-sqlite3';
import { bodyOf, type LadderTarget } from './bodies.js';
import { recordStatements, type StatementCall } from './recordStatements.js';

type DatabaseModule = typeof import('../src/db/database.js');
type TransactionModule = typeof import('../src/db/transaction.js');
type ContactsModule = typeof import('../src/domain/contacts/contacts.js');
type BatchModule = typeof import('../src/domain/contacts/batch.js');
type Schema = import('../src/db/schema.js').Database;
type Ctx = import('../src/domain/context.js').Ctx;
type BatchOutcome = import('../src/domain/contacts/batch.js').BatchOutcome;

const dist = process.env.LADDER_DIST ?? path.join(import.meta.dirname, '..', 'dist');
const load = <T>(file: string) => import(pathToFileURL(path.join(dist, file)).href) as Promise<T>;
const { openDatabase, directSqlite } = await load<DatabaseModule>('db/database.js');
const { inTransaction } = await load<TransactionModule>('db/transaction.js');
const { createContact } = await load<ContactsModule>('domain/contacts/contacts.js');
const { batchContacts } = await load<BatchModule>('domain/contacts/batch.js');

const dataDir = process.env.DATA_DIR!;
const orgId = process.env.LADDER_ORG!;
const targetName = (process.env.LADDER_TARGET ?? 'create') as LadderTarget;
const requests = Math.min(10_000, Number(process.env.LADDER_REQUESTS ?? 10_000));
const scopes = new Set(['contacts:read', 'contacts:write', 'groups:read', 'groups:write', 'files:read', 'files:write'] as const);
const ctxOf = (db: Kysely<Schema>, requestId: string): Ctx => ({
  db,
  orgId,
  actor: { kind: 'api_key', keyId: process.env.LADDER_KEY_ID!, scopes },
  requestId,
  now: new Date(),
});

interface BatchBody {
  mode: 'create' | 'upsert';
  match_on?: 'email' | 'external_id';
  atomic?: boolean;
  contacts: Parameters<typeof createContact>[1][];
}

/** A target: its status, and its domain write as the route calls it, answering what the route would send. */
const TARGETS: Record<LadderTarget, { status: number; write(ctx: Ctx, body: unknown): Promise<unknown> }> = {
  create: { status: 201, write: (ctx, body) => createContact(ctx, body as never, 'api') },
  'batch-upsert': {
    status: 200,
    write: async (ctx, body) => {
      const { mode, match_on: matchOn = 'email', atomic = false, contacts } = body as BatchBody;
      const data = await batchContacts(
        ctx,
        contacts.map((input) => ({ input })),
        { mode, matchOn, atomic },
      );
      return { object: 'batch_result', data };
    },
  },
};
const target = TARGETS[targetName];
const body = bodyOf(targetName);

/** Beside the ladder (LADDER_PARTS): raw plus only the reads and savepoints whose SQL `pattern` matches (case-insensitive). */
const PARTS = JSON.parse(process.env.LADDER_PARTS ?? '[]') as { name: string; pattern: string }[];

/** A rung's own copy of the seeded data directory (made before any connection opens the seeded one). */
const RUNG_DATA = ['record', 'raw', 'statements', 'transaction', 'domain', ...PARTS.map((part) => `part-${part.name}`)];
for (const rung of RUNG_DATA) cpSync(dataDir, `${dataDir}-${rung}`, { recursive: true });
const open = (rung: string) => openDatabase({ databaseUrl: null, dataDir: `${dataDir}-${rung}` });

type Call = Pick<StatementCall, 'sql' | 'values' | 'method'>;
const CONTROL = /^\s*(begin|commit|end|rollback(?!\s+to))\b/i;
const READ_OR_SAVEPOINT = /^\s*(select|with|pragma|savepoint|release|rollback)\b/i;

/**
 * The statements each of the first `count` requests runs (begin and commit left out: they are the
 * rungs' own), recorded on a connection of its own over the `record` copy (its statements wrapped,
 * then the connection closed, so that the measured ones run better-sqlite3 as it is), and the last
 * answer (a batch's steady shape: half created, half updated).
 */
async function recordRequests(count: number): Promise<{ calls: Call[][]; answer: unknown }> {
  let calls: Call[] = [];
  const undo = recordStatements(({ sql, values, method }) => calls.push({ sql, values, method }));
  const recording = open('record');
  try {
    const recorded: Call[][] = [];
    let answer: unknown;
    for (let n = 0; n < count; n++) {
      calls = [];
      answer = await target.write(ctxOf(recording.kysely, `req_ladder_${n}`), body(n));
      recorded.push(calls.filter((call) => !CONTROL.test(call.sql)));
    }
    return { calls: recorded, answer };
  } finally {
    await recording.close();
    undo();
  }
}

const recorded = await recordRequests(requests);
const answer = recorded.answer;
const last = recorded.calls.at(-1)!;
if (targetName === 'batch-upsert') {
  const data = (answer as { data: BatchOutcome[] }).data;
  const failed = data.filter((outcome) => 'error' in outcome);
  if (failed.length > 0) throw new Error(`the last recorded batch failed ${failed.length} items: ${JSON.stringify(failed[0])}`);
}

/** A replaying rung: its connection, and each request's statements (those `keep` keeps) prepared on it with their values. */
function replaying(rung: string, keep: (call: Call) => boolean) {
  const connection = directSqlite(open(rung).kysely)!;
  const steps = recorded.calls.map((calls) =>
    calls.filter(keep).map(({ sql, values, method }) => ({ statement: connection.prepare(sql) as Database.Statement, values, method })),
  );
  const [begin, commit] = [connection.prepare('begin immediate'), connection.prepare('commit')];
  let n = 0;
  return () => {
    const request = steps[n++]!;
    begin.run();
    for (const { statement, values, method } of request) statement[method](values);
    commit.run();
  };
}
const raw = replaying('raw', (call) => !READ_OR_SAVEPOINT.test(call.sql));
const statements = replaying('statements', () => true);
const parts = PARTS.map(({ name, pattern }) => {
  const part = new RegExp(pattern, 'i');
  return { name, replay: replaying(`part-${name}`, (call) => !READ_OR_SAVEPOINT.test(call.sql) || part.test(call.sql)) };
});

const transactionDb = open('transaction');
const domainDb = open('domain');

const app = Fastify({ logger: false });
app.get('/ping', async () => ({ ok: true }));
app.post('/ladder/bare', async (_request, reply) => reply.code(target.status).send(answer));
app.post('/ladder/raw', async (_request, reply) => {
  raw();
  return reply.code(target.status).send(answer);
});
app.post('/ladder/statements', async (_request, reply) => {
  statements();
  return reply.code(target.status).send(answer);
});
for (const { name, replay } of parts)
  app.post(`/ladder/part/${name}`, async (_request, reply) => {
    replay();
    return reply.code(target.status).send(answer);
  });
let transaction = 0;
app.post('/ladder/transaction', async (_request, reply) => {
  const calls = recorded.calls[transaction++]!;
  await inTransaction(transactionDb.kysely, async (trx) => {
    const on = directSqlite(trx)!;
    for (const { sql, values, method } of calls) on.prepare(sql)[method](values);
  });
  return reply.code(target.status).send(answer);
});
/**
 * Beside the ladder, `POST /ladder/hooks`: the bare rung under empty hooks of the kinds and number
 * orgdata's POST /contacts (and /contacts/batch) passes through (src/http: two onRequest callbacks,
 * the request edge's and the body timer's; authentication's async onRequest; idempotency's async
 * preHandler; the keyed-POST wrapper, an async function around the handler; two onSend callbacks,
 * idempotency's and the shutdown's; two onResponse callbacks, the request log's and metrics').
 * Over bare, it is what Fastify's lifecycle costs for that shape, whatever the hooks do.
 */
await app.register(async (hooked) => {
  const pass = (_request: unknown, _reply: unknown, done: () => void) => done();
  const passPayload = (_request: unknown, _reply: unknown, payload: unknown, done: (error: null, payload: unknown) => void) =>
    done(null, payload);
  hooked.addHook('onRequest', pass);
  hooked.addHook('onRequest', pass);
  hooked.addHook('onRequest', async () => undefined);
  hooked.addHook('preHandler', async () => undefined);
  hooked.addHook('onSend', passPayload);
  hooked.addHook('onSend', passPayload);
  hooked.addHook('onResponse', pass);
  hooked.addHook('onResponse', pass);
  const handler = async (_request: unknown, reply: { code(status: number): unknown }) => {
    reply.code(target.status);
    return answer;
  };
  hooked.post('/ladder/hooks', async (request, reply) => handler(request, reply));
});
app.post('/ladder/domain', async (request, reply) =>
  reply.code(target.status).send(await target.write(ctxOf(domainDb.kysely, request.id), request.body)),
);
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
const writes = last.filter((call) => !READ_OR_SAVEPOINT.test(call.sql)).length;
console.log(
  `ladder: ${targetName}, the last of ${requests} recorded requests: ${writes} writes and ${last.length - writes} reads and savepoints:`,
);
for (const call of last) console.log(`  ${call.sql.slice(0, 120)}`);
for (const { name, pattern } of PARTS) {
  const matched = last.filter((call) => new RegExp(pattern, 'i').test(call.sql)).length;
  // A part whose pattern no longer matches the code's SQL would measure raw again: fail instead.
  if (matched === 0) throw new Error(`ladder: part ${name}'s pattern ${pattern} matches none of the request's statements`);
  console.log(`ladder: part ${name}: ${matched} of its statements`);
}
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
