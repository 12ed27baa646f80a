import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SignedLinks } from '../src/domain/files/links.js';
import { ContractError, contractOperations } from './helpers/contract.js';
import { type Cursor, filtersOf, type FuzzRequest, RequestMaker, type Targets } from './helpers/fuzzRequests.js';
import { Random, showBytes } from './helpers/fuzzValues.js';
import { ALL_SCOPES, DIALECTS, type Harness, makeHarness, type Org } from './helpers/harness.js';
import { rawRequest } from './helpers/rawHttp.js';

/**
 * Every operation of the committed openapi.json, walked with hostile values in every path
 * parameter, query parameter, header and body field. For each response: never a 5xx; the contract
 * check of the harness (declared status, problem documents for errors); a request the contract
 * refuses is refused; and a refused request (4xx) changes no row of any organisation.
 *
 * Seeded and bounded: FUZZ_SEED (default below) repeats a run; FUZZ_SECONDS (default 15 per
 * dialect) bounds it, and when set also lifts the request cap (`FUZZ_SECONDS=600 npm run fuzz`).
 */
const SEED = Number(process.env.FUZZ_SEED ?? 0x5eed_f00d);
const SECONDS = Number(process.env.FUZZ_SECONDS ?? 15);
const MAX_REQUESTS = process.env.FUZZ_SECONDS ? Infinity : 4000;
/** Failures of one kind (check, operation, mutation) are reported once, with a count. */
const MAX_SIGNATURES = 60;

/** Tables holding an organisation's data, each in a stable order. */
const TABLES = [
  ['contacts', ['id']],
  ['labels', ['id']],
  ['contact_labels', ['contact_id', 'label_id']],
  ['contact_metadata', ['contact_id', 'key']],
  ['groups', ['id']],
  ['group_members', ['group_id', 'contact_id']],
  ['files', ['id']],
  ['events', ['id']],
] as const;

type Rows = Record<string, Record<string, unknown>[]>;

interface Failure {
  check: string;
  detail: string;
  request: FuzzRequest;
  status: number | null;
  body: string;
  count: number;
}

/** The request, with the run's keys named by role (each run makes its own keys). */
function describeRequest(r: FuzzRequest, keys: Targets['keys']): string {
  const headers = { ...r.headers };
  const roles: [string, string][] = [
    [keys.all, '<all-scopes key>'],
    [keys.readOnly, '<read-only key>'],
    [keys.foreign, "<other org's key>"],
  ];
  if (headers.authorization) {
    for (const [key, role] of roles) headers.authorization = headers.authorization.split(key).join(role);
  }
  return [
    `${r.method} ${r.url.length > 300 ? `${r.url.slice(0, 300)}… (${r.url.length} chars)` : r.url}`,
    `    headers: ${JSON.stringify(headers)}${r.rawHeaderLines ? ` + raw lines ${JSON.stringify(r.rawHeaderLines)} (over a socket)` : ''}`,
    `    body: ${r.payload === undefined ? '(none)' : showBytes(r.payload)}`,
  ].join('\n');
}

describe.each(DIALECTS)('fuzzing every operation on %s', (dialect) => {
  let h: Harness;
  let org: Org;
  let port: number;
  let keys: Targets['keys'];
  let foreign: string[];
  let links: SignedLinks;
  /** Cursors the lists handed out, most recent last. */
  const cursors: Cursor[] = [];
  let restocks = 0;

  const call = async (key: string, method: 'POST' | 'PUT' | 'GET', url: string, body?: unknown) => {
    const res = await h.call(key, method, url, body);
    if (res.statusCode >= 300) throw new Error(`setup ${method} ${url} answered ${res.statusCode}: ${res.body}`);
    return res.json<{ id: string; upload_url: string }>();
  };
  const upload = async (uploadUrl: string) => {
    const res = await h.app.inject({ method: 'PUT', url: new URL(uploadUrl).pathname, payload: 'abc' });
    if (res.statusCode !== 200) throw new Error(`setup upload answered ${res.statusCode}: ${res.body}`);
  };

  beforeAll(async () => {
    h = await makeHarness(dialect);
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    port = (h.app.server.address() as AddressInfo).port;
    links = new SignedLinks(h.config.secretKey, h.config.publicUrl);
    org = await h.newOrg('Fuzzed org');
    const other = await h.newOrg('Bystander org');
    keys = {
      all: await org.key(ALL_SCOPES),
      readOnly: await org.key(['contacts:read', 'groups:read', 'files:read']),
      foreign: await other.key(ALL_SCOPES),
    };
    // The other organisation's records: their ids must be unknown here.
    const theirs = await other.key(ALL_SCOPES);
    const theirContact = await call(theirs, 'POST', '/api/v1/contacts', { first_name: 'Them', email: 'them@example.com' });
    const theirLabel = await call(theirs, 'POST', '/api/v1/contacts/labels', { name: 'Theirs' });
    const theirGroup = await call(theirs, 'POST', '/api/v1/groups', { name: 'Theirs' });
    const theirFile = await call(theirs, 'POST', '/api/v1/files', { name: 't.txt', content_type: 'text/plain', size: 3 });
    foreign = [theirContact.id, theirLabel.id, theirGroup.id, theirFile.id];
  });
  afterAll(() => h?.close());

  async function snapshot(): Promise<Rows> {
    const rows: Rows = {};
    for (const [table, order] of TABLES) {
      let query = h.db.kysely.selectFrom(table).selectAll();
      for (const column of order) query = query.orderBy(column as never);
      rows[table] = (await query.execute()) as Record<string, unknown>[];
    }
    return rows;
  }

  function difference(before: Rows, after: Rows): string | null {
    for (const [table] of TABLES) {
      const a = JSON.stringify(before[table]);
      const b = JSON.stringify(after[table]);
      if (a === b) continue;
      const was = before[table]!.map((row) => JSON.stringify(row));
      const now = after[table]!.map((row) => JSON.stringify(row));
      const added = now.filter((row) => !was.includes(row));
      const removed = was.filter((row) => !now.includes(row));
      return `${table}: +${JSON.stringify(added).slice(0, 400)} -${JSON.stringify(removed).slice(0, 400)}`;
    }
    return null;
  }

  /** Live targets of the fuzzed organisation, restocked when the fuzz deleted or used them up. */
  async function targets(rows: Rows): Promise<{ targets: Targets; restocked: boolean }> {
    const mine = (table: string) => rows[table]!.filter((row) => row.org_id === org.orgId);
    let restocked = false;
    const contacts = mine('contacts').map((row) => String(row.id));
    const labels = mine('labels').map((row) => String(row.id));
    const groups = mine('groups').map((row) => String(row.id));
    const files = mine('files');
    const pending = files.filter((f) => f.status === 'pending').map((f) => ({ id: String(f.id), size: Number(f.size) }));
    const ready = files.filter((f) => f.status === 'ready').map((f) => String(f.id));
    const n = () => `${dialect}-${++restocks}`;
    while (contacts.length < 3) {
      contacts.push((await call(keys.all, 'POST', '/api/v1/contacts', { first_name: 'Seed', email: `seed-${n()}@example.com` })).id);
      restocked = true;
    }
    while (labels.length < 2) {
      labels.push((await call(keys.all, 'POST', '/api/v1/contacts/labels', { name: `Seed ${n()}` })).id);
      restocked = true;
    }
    if (groups.length < 2 || mine('group_members').length === 0) {
      const group = (await call(keys.all, 'POST', '/api/v1/groups', { name: `Seed ${n()}` })).id;
      await call(keys.all, 'POST', `/api/v1/groups/${group}/members`, { contact_ids: contacts.slice(0, 2) });
      await call(keys.all, 'PUT', `/api/v1/contacts/${contacts[0]}/labels/${labels[0]}`);
      groups.push(group);
      restocked = true;
    }
    while (pending.length < 2 || ready.length < 1) {
      const reserved = await call(keys.all, 'POST', '/api/v1/files', { name: `seed-${n()}.txt`, content_type: 'text/plain', size: 3 });
      if (ready.length < 1) {
        await upload(reserved.upload_url);
        ready.push(reserved.id);
      } else pending.push({ id: reserved.id, size: 3 });
      restocked = true;
    }
    const far = new Date(Date.now() + 3600_000);
    return {
      restocked,
      targets: {
        contacts,
        labels,
        groups,
        members: mine('group_members').map((row) => [String(row.group_id), String(row.contact_id)]),
        pending,
        ready,
        events: mine('events').map((row) => String(row.id)),
        foreign,
        keys,
        cursors,
        link: (kind, fileId) => {
          const url = kind === 'upload' ? links.uploadUrl(fileId, org.orgId, far) : links.downloadUrl(fileId, org.orgId, far);
          return new URL(url).pathname.split('/').pop()!;
        },
      },
    };
  }

  /** Keeps the `next_cursor` of a list page, with what it is bound to. */
  function harvestCursor(r: FuzzRequest, body: string): void {
    let next: unknown;
    try {
      next = (JSON.parse(body) as { next_cursor?: unknown }).next_cursor;
    } catch {
      return;
    }
    if (typeof next !== 'string') return;
    const [path = '', search = ''] = r.url.split('?');
    const org = r.headers.authorization === `Bearer ${keys.foreign}` ? 'foreign' : 'mine';
    if (org === 'mine' && r.headers.authorization !== `Bearer ${keys.all}` && r.headers.authorization !== `Bearer ${keys.readOnly}`) return;
    cursors.push({ operationId: r.operationId, path, filters: filtersOf(search), org, cursor: next });
    if (cursors.length > 40) cursors.shift();
  }

  /** Sends a fuzz request; the harness's contract check throws a ContractError (with the status). */
  async function send(r: FuzzRequest): Promise<{ status: number; body: string; contract: string | null }> {
    try {
      if (r.rawHeaderLines) {
        const head = [
          `${r.method} ${r.url} HTTP/1.1`,
          'Host: 127.0.0.1',
          ...Object.entries(r.headers).map(([name, value]) => `${name}: ${value}`),
          ...r.rawHeaderLines,
          `Content-Length: ${r.payload?.length ?? 0}`,
          'Connection: close',
        ].join('\r\n');
        const res = await rawRequest(port, [Buffer.concat([Buffer.from(`${head}\r\n\r\n`), r.payload ?? Buffer.alloc(0)])]);
        return { status: res.status, body: res.body, contract: null };
      }
      const res = await h.app.inject({
        method: r.method as 'GET',
        url: r.url,
        headers: r.headers,
        ...(r.payload !== undefined ? { payload: r.payload } : {}),
      });
      return { status: res.statusCode, body: res.body, contract: null };
    } catch (error) {
      if (error instanceof ContractError) return { status: error.status, body: error.body, contract: error.message };
      throw error;
    }
  }

  it(
    `answers hostile requests to every operation by the contract, writing nothing when it refuses (seed ${SEED})`,
    {
      timeout: SECONDS * 1000 + 120_000,
    },
    async () => {
      const operations = contractOperations();
      const rng = new Random(SEED);
      const maker = new RequestMaker(rng, `${dialect[0]}${SEED.toString(36)}-`);
      const failures = new Map<string, Failure>();
      const statuses = new Map<string, number>();
      const seen = new Set<string>();
      /** mutation → status → count, printed with FUZZ_VERBOSE=1. */
      const byMutation = new Map<string, Map<number, number>>();
      let skipped = 0;
      let sent = 0;
      const fail = (check: string, detail: string, r: FuzzRequest, status: number | null, body: string) => {
        const signature = `${check} | ${r.operationId} | ${r.mutation}`;
        const known = failures.get(signature);
        if (known) known.count++;
        else if (failures.size < MAX_SIGNATURES) failures.set(signature, { check, detail, request: r, status, body, count: 1 });
      };

      const started = Date.now();
      const deadline = started + SECONDS * 1000;
      let rows = await snapshot();
      // Every operation first, then at random until the time or the count runs out.
      for (let i = 0; i < MAX_REQUESTS && (i < operations.length * 3 || Date.now() < deadline); i++) {
        const stock = await targets(rows);
        if (stock.restocked) rows = await snapshot();
        const op = i < operations.length * 3 ? operations[i % operations.length]! : rng.pick(operations);
        const r = maker.make(op, stock.targets);
        let result: Awaited<ReturnType<typeof send>>;
        try {
          result = await send(r);
        } catch (error) {
          // The client library refused to send it (e.g. a header value it will not write).
          skipped++;
          if (skipped < 5) console.warn(`fuzz: not sent (${String(error)}): ${r.method} ${r.url.slice(0, 100)}`);
          continue;
        }
        sent++;
        seen.add(r.operationId);
        const { status, body } = result;
        statuses.set(`${Math.floor(status / 100)}xx`, (statuses.get(`${Math.floor(status / 100)}xx`) ?? 0) + 1);
        const counts = byMutation.get(r.mutation) ?? new Map<number, number>();
        counts.set(status, (counts.get(status) ?? 0) + 1);
        byMutation.set(r.mutation, counts);
        if (status >= 500) fail('5xx', `answered ${status}`, r, status, body);
        if (result.contract) fail('contract', result.contract, r, status, body);
        if (r.mustRefuse && status < 400)
          fail('accepted', `answered ${status} although the contract refuses it: ${r.mustRefuse}`, r, status, body);
        if (status === 200 && r.method === 'GET') harvestCursor(r, body);
        const after = await snapshot();
        if (status >= 400 && status < 500) {
          const changed = difference(rows, after);
          if (changed) fail('wrote', `answered ${status} but changed rows: ${changed}`, r, status, body);
        }
        rows = after;
      }

      const seconds = ((Date.now() - started) / 1000).toFixed(1);
      console.info(
        `fuzz on ${dialect}: seed ${SEED}, ${sent} requests in ${seconds} s (${skipped} not sendable), ` +
          `statuses ${JSON.stringify(Object.fromEntries(statuses))}, ${seen.size}/${operations.length} operations`,
      );
      if (process.env.FUZZ_VERBOSE) {
        console.info(`  rows at the end: ${JSON.stringify(Object.fromEntries(Object.entries(rows).map(([t, r]) => [t, r.length])))}`);
        for (const [mutation, counts] of [...byMutation].sort()) {
          console.info(`  ${mutation}: ${JSON.stringify(Object.fromEntries([...counts].sort(([a], [b]) => a - b)))}`);
        }
      }
      expect(
        [...operations.map((o) => o.operationId)].filter((id) => !seen.has(id)),
        'operations never fuzzed',
      ).toEqual([]);
      const report = [...failures.values()].map(
        (f) =>
          `[${f.check}] ×${f.count} ${f.request.operationId} (${f.request.mutation}) → ${f.status ?? '?'}: ${f.detail}\n` +
          `  ${describeRequest(f.request, keys)}\n    response: ${f.body.slice(0, 300)}`,
      );
      if (report.length > 0) {
        expect.fail(
          `the fuzz (seed ${SEED}, FUZZ_SEED=${SEED} to repeat) found ${report.length} kinds of failure on ${dialect}:\n\n${report.join('\n\n')}`,
        );
      }
    },
  );
});
