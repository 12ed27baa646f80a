/**
 * The server of create's ladder (bench/ladder.ts): one process, one Fastify app without hooks or
 * schemas, each route a rung that adds one layer of orgdata's create on top of the one below, all
 * over the same SQLite database (a data directory bench/ladder.ts seeded) opened as the server
 * opens it (the built app's `openDatabase`: WAL, the statement cache). Each route answers 201 with
 * a contact's JSON, serialized by Fastify without a schema.
 *
 * - `POST /ladder/bare`: the body parsed, the recorded answer sent. Nothing else.
 * - `POST /ladder/raw`: plus exactly the statements one create runs (recorded at start from the
 *   domain's own createContact), their values made before the server listens, run on the
 *   connection between `BEGIN IMMEDIATE` and `COMMIT` through the statement cache.
 * - `POST /ladder/transaction`: the same statements inside Kysely's transaction as the domain opens
 *   it (`inTransaction`: `db.transaction().execute`, the connection adopted, statements run
 *   directly on it): what the transaction's machinery adds.
 * - `POST /ladder/domain`: the built app's `createContact(ctx, body, 'api')`, as the route calls it
 *   without an Idempotency-Key: the fields checked and normalised, ids and times made, the row,
 *   its search text, the event and the view built, the webhook endpoints read for the outbox, the
 *   statements bound through PreparedQuery.
 *
 * The full route above the domain (hooks: authentication, rate limits, the key guard, strict
 * JSON, body and response schemas, the error handler; idempotency, request log, metrics) is the
 * app itself, measured by bench/budget.ts (bench/ladder.ts runs it with those three off).
 *
 * Environment: PORT, DATA_DIR, LADDER_ORG, LADDER_KEY_ID, LADDER_REQUESTS (how many raw and
 * transaction requests to make values for, at most 10,000), LADDER_DIST (the built app's dist/).
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import Fastify from 'fastify';
import type { Kysely } from 'kysely';
import { createBody } from './bodies.js';
import { recordStatements } from './recordStatements.js';

type DatabaseModule = typeof import('../src/db/database.js');
type TransactionModule = typeof import('../src/db/transaction.js');
type ContactsModule = typeof import('../src/domain/contacts/contacts.js');
type Schema = import('../src/db/schema.js').Database;
type Ctx = import('../src/domain/context.js').Ctx;

const dist = process.env.LADDER_DIST ?? path.join(import.meta.dirname, '..', 'dist');
const load = <T>(file: string) => import(pathToFileURL(path.join(dist, file)).href) as Promise<T>;
const { openDatabase, directSqlite } = await load<DatabaseModule>('db/database.js');
const { inTransaction } = await load<TransactionModule>('db/transaction.js');
const { createContact } = await load<ContactsModule>('domain/contacts/contacts.js');

const dataDir = process.env.DATA_DIR!;
const orgId = process.env.LADDER_ORG!;
const requests = Math.min(10_000, Number(process.env.LADDER_REQUESTS ?? 10_000));
const scopes = new Set(['contacts:read', 'contacts:write', 'groups:read', 'groups:write', 'files:read', 'files:write'] as const);
const ctxOf = (db: Kysely<Schema>, requestId: string): Ctx => ({
  db,
  orgId,
  actor: { kind: 'api_key', keyId: process.env.LADDER_KEY_ID!, scopes },
  requestId,
  now: new Date(),
});

interface Call {
  sql: string;
  values: unknown[];
}

/**
 * The statements one create runs, recorded on a connection of its own (its statements wrapped,
 * then the connection closed, so the measured one runs better-sqlite3 as it is): the writes
 * (begin and commit left out, they are the rungs' own) and the reads.
 */
async function recordCreate(n: number): Promise<{ calls: Call[]; answer: unknown }> {
  const calls: Call[] = [];
  const undo = recordStatements(({ sql, values }) => calls.push({ sql, values }));
  const recording = openDatabase({ databaseUrl: null, dataDir });
  try {
    // Once to prepare its statements (the measured connection prepares them in its warm-up too).
    await createContact(ctxOf(recording.kysely, 'req_ladder_first'), createBody(n - 1), 'api');
    calls.length = 0;
    const answer = await createContact(ctxOf(recording.kysely, 'req_ladder_recorded'), createBody(n), 'api');
    return { calls: calls.filter((call) => !/^\s*(begin|commit|rollback)\b/i.test(call.sql)), answer };
  } finally {
    await recording.close();
    undo();
  }
}

const RECORDED_N = 987_654_321;
const recorded = await recordCreate(RECORDED_N);
const answer = recorded.answer as { id: string };
const writes = recorded.calls.filter((call) => !/^\s*(select|with|pragma)\b/i.test(call.sql));
const eventId = writes.flatMap((call) => call.values).find((value) => typeof value === 'string' && /^evt_\w{20}$/.test(value)) as string;
if (!eventId || writes.length < 2)
  throw new Error(`recorded ${writes.length} writes: ${writes.map((w) => w.sql.slice(0, 60)).join(' | ')}`);

/**
 * The recorded writes made new for request `k` of a rung: the contact's and the event's ids, and
 * the request's number wherever it stands (name, email, search text, the event's data), a number
 * of five digits (`base` + k) as the domain rung's bodies and bench/budget.ts's creates have, so each
 * request's words are its own and as long as a create's (the search index writes each word's prefixes).
 */
function valuesFor(base: number, tag: string, k: number): unknown[][] {
  const id = `${tag}${k}`.padStart(12, '0');
  const swap = (value: unknown) =>
    typeof value === 'string'
      ? value
          .replaceAll(answer.id, answer.id.slice(0, -12) + id)
          .replaceAll(eventId, eventId.slice(0, -12) + id)
          .replaceAll(String(RECORDED_N), String(base + k))
      : value;
  return writes.map((call) => call.values.map(swap));
}
const made = (base: number, tag: string) => Array.from({ length: requests }, (_, k) => valuesFor(base, tag, k));
const rawValues = made(10_000, 'r');
const transactionValues = made(20_000, 't');

const db = openDatabase({ databaseUrl: null, dataDir });
const connection = directSqlite(db.kysely)!;
const statements = writes.map((call) => connection.prepare(call.sql));
const begin = connection.prepare('begin immediate');
const commit = connection.prepare('commit');

const app = Fastify({ logger: false });
app.get('/ping', async () => ({ ok: true }));
app.post('/ladder/bare', async (_request, reply) => reply.code(201).send(answer));
let raw = 0;
app.post('/ladder/raw', async (_request, reply) => {
  const values = rawValues[raw++]!;
  begin.run();
  for (let i = 0; i < statements.length; i++) statements[i]!.run(values[i]);
  commit.run();
  return reply.code(201).send(answer);
});
let transaction = 0;
app.post('/ladder/transaction', async (_request, reply) => {
  const values = transactionValues[transaction++]!;
  await inTransaction(db.kysely, async (trx) => {
    const on = directSqlite(trx)!;
    for (let i = 0; i < writes.length; i++) on.prepare(writes[i]!.sql).run(values[i]);
  });
  return reply.code(201).send(answer);
});
/**
 * Beside the ladder, `POST /ladder/hooks`: the bare rung under empty hooks of the kinds and number
 * orgdata's POST /contacts passes through (src/http: two onRequest callbacks, the request edge's
 * and the body timer's; authentication's async onRequest; idempotency's async preHandler; the
 * keyed-POST wrapper, an async function around the handler; two onSend callbacks, idempotency's
 * and the shutdown's; two onResponse callbacks, the request log's and metrics'). Over bare, it is
 * what Fastify's lifecycle costs for that shape, whatever the hooks do.
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
    reply.code(201);
    return answer;
  };
  hooked.post('/ladder/hooks', async (request, reply) => handler(request, reply));
});
app.post('/ladder/domain', async (request, reply) =>
  reply.code(201).send(await createContact(ctxOf(db.kysely, request.id), request.body as never, 'api')),
);
await app.listen({ port: Number(process.env.PORT), host: '127.0.0.1' });
console.log(`ladder: ${writes.length} writes and ${recorded.calls.length - writes.length} reads a create:`);
for (const call of recorded.calls) console.log(`  ${call.sql.slice(0, 120)}`);
process.on('SIGTERM', () => void app.close().then(() => process.exit(0)));
