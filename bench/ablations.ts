/**
 * The parts bench/ablate.ts switches off, each with the guarantee it buys (issue 46). A source
 * ablation is a list of exact replacements in src/, each of which must match exactly once
 * (test/benchAblations.test.ts checks them, so a change of the code that moves a part fails the
 * tests rather than the next measurement).
 */

export interface Replacement {
  file: string;
  find: string;
  replace: string;
}

export interface Ablation {
  name: string;
  /** What is switched off, and the guarantee it buys. */
  what: string;
  replacements?: Replacement[];
  env?: Record<string, string>;
}

export const ABLATIONS: Ablation[] = [
  {
    name: 'control',
    what: 'nothing switched off: the same source built in a directory of its own, as every source ablation is (what the place alone changes)',
    replacements: [],
  },
  {
    name: 'idempotency',
    what: 'no Idempotency-Key sent: no fingerprint, no claim committed before the work, no stored answer (a retry runs once)',
    env: { BENCH_IDEMPOTENCY: '0' },
  },
  {
    name: 'request-id-header',
    what: 'no Request-Id header (API.md: on every response); the id itself still made',
    replacements: [{ file: 'src/http/requestEdge.ts', find: "    reply.header('request-id', request.id);", replace: '' }],
  },
  {
    name: 'location',
    what: "no Location header on a created contact's 201",
    replacements: [
      {
        file: 'src/http/routes/contacts.ts',
        find: "      reply.code(201).header('location', `${routeOf(request).url}/${contact.id}`);",
        replace: '      reply.code(201);',
      },
    ],
  },
  {
    name: 'request-log',
    what: "REQUEST_LOG_DAYS=0: no request log row, no hand-off in onResponse (the dashboard's request log, usage)",
    env: { BENCH_ENV: JSON.stringify({ REQUEST_LOG_DAYS: '0' }) },
  },
  {
    name: 'metrics',
    what: 'METRICS_TOKEN unset: no per-route counters and histograms (off unless an operator sets it)',
    env: { BENCH_ENV: JSON.stringify({ METRICS_TOKEN: '' }) },
  },
  {
    name: 'rate-limits',
    what: 'the token bucket and the daily quota not taken: the first decision is reused (limits per key and per organisation)',
    replacements: [
      {
        file: 'src/http/authenticate.ts',
        find: 'const decision = await deps.rateLimiter.take(key.id, key.orgId, now);',
        replace:
          "const decision = ((globalThis as { __ablated?: Awaited<ReturnType<RateLimiter['take']>> }).__ablated ??= await deps.rateLimiter.take(key.id, key.orgId, now));",
      },
    ],
  },
  {
    name: 'key-guard',
    what: '`PRAGMA data_version` not read before the key cache is used (a key revoked by another process is refused at once)',
    replacements: [
      { file: 'src/infra/keyCache/sqliteGuard.ts', find: 'const now = statement.get() as number;', replace: 'const now = seen;' },
    ],
  },
  {
    name: 'outbox-read',
    what: "the organisation's enabled webhook endpoints not read in the write's transaction (a delivery queued for every endpoint enabled at commit)",
    replacements: [
      {
        file: 'src/domain/events/record.ts',
        find: 'const endpoints = await enabledEndpoints.execute(trx, [ctx.orgId]);',
        replace: 'const endpoints = false ? await enabledEndpoints.execute(trx, [ctx.orgId]) : [];',
      },
    ],
  },
  {
    name: 'body-validation',
    what: "the route's JSON Schema not checked (Ajv): the domain's own checks still run (400 with every refused field named)",
    replacements: [
      {
        file: 'src/http/validation.ts',
        find: "(httpPart === 'body' ? compiled('body', schema) : compiled('text', schema))",
        replace: "(httpPart === 'body' ? () => true : compiled('text', schema))",
      },
    ],
  },
  {
    name: 'item-validation',
    what: "the batch's items not checked against ContactCreate's JSON Schema (Ajv, each item answered on its own)",
    replacements: [
      {
        file: 'src/http/routes/contacts.ts',
        find: 'if (checkItem(item)) {',
        replace: 'if ((item as unknown) !== undefined || checkItem(item)) {',
      },
    ],
  },
  {
    name: 'email-holders',
    what: "a batch's holders of its emails not read (one of the two branches of planBatch's one read; the other, by external id, costs alike): a conflict on email then surfaces as the unique index's refusal",
    replacements: [
      {
        file: 'src/domain/contacts/batchPlan.ts',
        find: "return externalIds === 0 ? byEmail : byEmail.unionAll(branch('external_id', 'x', 1 + emails, externalIds));",
        // The external ids' branch alone (the emails' values stay bound to no slot); at least one, so that it compiles.
        replace: "return emails < 0 ? byEmail : branch('external_id', 'x', 1 + emails, Math.max(1, externalIds));",
      },
    ],
  },
  {
    name: 'labels-read',
    what: "the labels of a batch's matched contacts not read (bench:check's contacts have none): their views show labels",
    replacements: [
      {
        file: 'src/domain/contacts/patch.ts',
        find: 'const views = await toContactViews(trx, orgId, rows);',
        replace: 'const views = rows.map((row) => toContactView(row, []));',
      },
      {
        file: 'src/domain/contacts/patch.ts',
        find: "import { CONTACT_COLUMNS, toContactViews, type ContactView } from './view.js';",
        replace: "import { CONTACT_COLUMNS, toContactView, type ContactView } from './view.js';",
      },
    ],
  },
  {
    name: 'field-checks',
    what: "the domain's own checks of each field (lengths, characters, the email's form, metadata) not run; the email is still normalised",
    replacements: [
      {
        file: 'src/domain/contacts/contacts.ts',
        find: 'const input = withNormalEmail(given);\n  checkFields(input);',
        replace: 'const input = withNormalEmail(given);\n  if (false as boolean) checkFields(input);',
      },
      {
        file: 'src/domain/contacts/batch.ts',
        find: 'const errors = contactFieldErrors(input);',
        replace: 'const errors = false ? contactFieldErrors(input) : ([] as ReturnType<typeof contactFieldErrors>);',
      },
    ],
  },
  {
    name: 'strict-json',
    what: 'no walk of the parsed body for repeated and `__proto__` / `constructor.prototype` keys (an ambiguous or polluting body is refused); the scan of the keys stays (escaped keys are parsed around a V8 bug)',
    replacements: [
      {
        file: 'src/http/jsonBody.ts',
        find: 'const shape = shapeOf(value);',
        replace: 'const shape = false ? shapeOf(value) : { keys: keys.count, polluting: false };',
      },
    ],
  },
  {
    name: 'key-lookup',
    what: "the key's verification (cache lookup by its HMAC, expiry, revocation) done once and reused: every request's key checked",
    replacements: [
      {
        file: 'src/http/authenticate.ts',
        find: 'const key = await authenticateKey(deps.db, deps.secret, match[1], now, deps.keyCache);',
        replace:
          'const key = ((globalThis as { __key?: Awaited<ReturnType<typeof authenticateKey>> }).__key ??= await authenticateKey(deps.db, deps.secret, match[1], now, deps.keyCache));',
      },
    ],
  },
  {
    name: 'limit-headers',
    what: 'no RateLimit-Policy, RateLimit and X-RateLimit-* headers on the answer (every authenticated response carries them, seed spec)',
    replacements: [
      {
        file: 'src/http/rateLimitHeaders.ts',
        find: "  reply.header('ratelimit-policy', policy);",
        replace: "  if (decision.refusal === null) return;\n  reply.header('ratelimit-policy', policy);",
      },
    ],
  },
  {
    name: 'response-schema',
    what: "the answer serialized by JSON.stringify, not by the route's response schema (fast-json-stringify: only the documented fields leave)",
    replacements: [
      {
        // Every serializer, the app's and a route's own (the batch's), is compiled here.
        file: 'src/http/serializers.ts',
        find: '  if (!serialize) serializers.set(key, (serialize = compile(route)));',
        replace: '  if (!serialize) serializers.set(key, (serialize = ((data: unknown) => JSON.stringify(data)) as Serializer));',
      },
    ],
  },
  {
    name: 'request-edge',
    what: "the request edge's checks not run (URL length and encoding, HEAD and GET-with-body refusals) but the Request-Id header",
    replacements: [
      {
        file: 'src/http/requestEdge.ts',
        find: "    reply.header('request-id', request.id);\n    if (request.url.length > MAX_URL_BYTES) {",
        replace:
          "    reply.header('request-id', request.id);\n    if ((done as unknown) !== null) return done();\n    if (request.url.length > MAX_URL_BYTES) {",
      },
    ],
  },
  {
    name: 'batch-savepoints',
    what: "a batch's inserts and updates not each under a savepoint (SQLite: each page they change copied to the sub-journal); a failure then cannot be retried item by item",
    replacements: [
      {
        file: 'src/domain/contacts/batchWrites.ts',
        find: '  if (direct) direct.prepare(`${statement} batch_write`).run();',
        replace: '  if (direct) return;',
      },
    ],
  },
  {
    name: 'events',
    what: "no event recorded (the outbox: each change's event written in the change's own transaction; its JSON, ids, the endpoints read): what events cost in all, their rows included",
    replacements: [
      {
        file: 'src/domain/events/record.ts',
        find: '  if (changes.length === 0) return;\n  const at = nowIso(new Date());',
        replace: '  if (changes.length >= 0) return;\n  const at = nowIso(new Date());',
      },
    ],
  },
  {
    name: 'stalled-bodies',
    what: 'no body timer (a body that stalls is answered 408 and its connection closed)',
    replacements: [
      {
        file: 'src/http/bodyTimeout.ts',
        find: "    if (raw.complete || typeof socket?.bytesRead !== 'number') return;",
        // Always true, and typed so that nothing after it narrows to never (a build that does not compile measures nothing).
        replace: "    if (Math.random() >= 0 || raw.complete || typeof socket?.bytesRead !== 'number') return;",
      },
    ],
  },
];

/**
 * Several ablations as one build, their replacements made in the order named (request-edge's text
 * holds request-id-header's line: named first, it leaves that line for the second to remove), their
 * settings merged. What the parts cost together, against the sum of what each costs alone: a part
 * of the route's cost that no single ablation shows (the lines around the guarantees) shows here.
 */
function together(name: string, what: string, names: string[]): Ablation {
  const parts = names.map((n) => {
    const found = ABLATIONS.find((a) => a.name === n);
    if (!found) throw new Error(`no ablation named ${n}`);
    return found;
  });
  const env = Object.assign({}, ...parts.map((p) => (p.env?.BENCH_ENV ? (JSON.parse(p.env.BENCH_ENV) as Record<string, string>) : {})));
  return {
    name,
    what,
    replacements: parts.flatMap((p) => p.replacements ?? []),
    ...(Object.keys(env).length > 0 ? { env: { BENCH_ENV: JSON.stringify(env) } } : {}),
  };
}

/** The route's guarantees above the domain, each measured alone above, switched off at once. */
export const ROUTE_PARTS = [
  'limit-headers',
  'key-lookup',
  'rate-limits',
  'stalled-bodies',
  'metrics',
  'body-validation',
  'location',
  'request-edge',
  'request-id-header',
  'response-schema',
  'key-guard',
  'strict-json',
];

ABLATIONS.push(
  together('route-guarantees', `every part of the route above the domain switched off at once: ${ROUTE_PARTS.join(', ')}`, ROUTE_PARTS),
);
