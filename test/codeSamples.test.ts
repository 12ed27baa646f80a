import { execFile } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLIENT_SAMPLES } from '../src/http/openapi/codeSamples.js';
import { EXAMPLE_IDS, EXAMPLE_LINKS } from '../src/http/openapi/examples.js';
import { makeHarness, type Harness } from './helpers/harness.js';
import { suiteServer } from './helpers/suiteServer.js';

// Issue 31, item 3: every operation carries a curl and an @orgdata/client sample, and the samples
// do what they say against a real server.

type Json = Record<string, unknown>;
interface Sample {
  lang: string;
  label: string;
  source: string;
}

const ROOT = path.resolve(import.meta.dirname, '..');
const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** operationId → its operation, from a document. */
function operations(doc: Json): Map<string, Json & { method: string; path: string }> {
  const out = new Map<string, Json & { method: string; path: string }>();
  for (const [p, item] of Object.entries(doc.paths as Record<string, Json>)) {
    for (const [method, op] of Object.entries(item)) {
      if (HTTP_METHODS.includes(method)) out.set(String((op as Json).operationId), { ...(op as Json), method, path: p });
    }
  }
  return out;
}

const samplesOf = (op: Json) => (op['x-codeSamples'] ?? []) as Sample[];
const curlOf = (op: Json) => samplesOf(op).find((s) => s.label === 'curl');
const clientOf = (op: Json) => samplesOf(op).find((s) => s.lang === 'TypeScript');

describe('code samples in the OpenAPI document', () => {
  let h: Harness;
  let doc: Json;
  beforeAll(async () => {
    h = await makeHarness('sqlite', { env: { PUBLIC_URL: 'http://localhost:3000' } });
    doc = (await h.call(null, 'GET', '/api/v1/openapi.json')).json();
  });
  afterAll(() => h.close());

  it('are on every operation: curl with its headers and body, and the official client', () => {
    const ops = operations(doc);
    expect(ops.size).toBeGreaterThanOrEqual(30);
    for (const [operationId, op] of ops) {
      const curl = curlOf(op);
      const client = clientOf(op);
      expect(curl?.lang, `${operationId} has a curl sample`).toBe('Shell');
      expect(client, `${operationId} has a client sample (src/http/openapi/codeSamples.ts)`).toBeDefined();
      expect(client!.source).toContain('@orgdata/client');
      const source = curl!.source;
      expect(source).toMatch(
        new RegExp(`^curl -sS${op.method === 'get' ? '' : ` -X ${op.method.toUpperCase()}`} "http://localhost:3000/`, 'm'),
      );
      expect(source.includes('Authorization: Bearer $ORGDATA_API_KEY'), operationId).toBe((op.security as unknown[]).length > 0);
      const body = ((op.requestBody as Json | undefined)?.content as Record<string, Json> | undefined)?.['application/json'];
      if (body) {
        expect(source).toContain('-H "Content-Type: application/json"');
        expect(JSON.parse(/ -d '([^']*)'/.exec(source)![1]!)).toEqual(body.example);
      }
      const idempotent = ((op.parameters ?? []) as Json[]).some((p) => p.$ref === '#/components/parameters/IdempotencyKey');
      expect(source.includes('-H "Idempotency-Key: $IDEMPOTENCY_KEY"'), operationId).toBe(idempotent);
      expect(source.startsWith("IDEMPOTENCY_KEY=$(node -p 'crypto.randomUUID()')"), operationId).toBe(idempotent);
      // No path template left: every parameter is an example value.
      expect(source).not.toMatch(/\{\w+\}/);
      expect(client!.source.startsWith('// sample.mjs'), operationId).toBe(true);
      if (!client!.source.includes('import { VERSION }')) {
        expect(client!.source).toContain("new Orgdata({ apiKey: process.env.ORGDATA_API_KEY, baseUrl: 'http://localhost:3000/api/v1' })");
      }
    }
  });

  it('come from a table with one entry per operation and none for an operation that does not exist', () => {
    expect(Object.keys(CLIENT_SAMPLES).sort()).toEqual([...operations(doc).keys()].sort());
  });
});

// Each client sample is a tsx process of a second or more: a generous timeout for a loaded machine.
describe('code samples run against a real server', { timeout: 120_000 }, () => {
  let ops: Map<string, Json>;
  let work: string;
  // Registered before the server, so run once it has stopped (vitest runs afterAll hooks last first).
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });
  const suite = suiteServer('sqlite', {}, { publicUrl: true, org: true, stopWith: 'SIGTERM', startTimeout: 60_000 });
  /** Example value → the real one, as records are made. */
  const real = new Map<string, string>();
  const bytes = randomBytes(48213);

  beforeAll(async () => {
    ops = operations((await (await fetch(`${suite.url}/api/v1/openapi.json`)).json()) as Json);
    // Outside the repository (other suites check it gains no file), with the workspace client
    // linked in as an installed package would be.
    work = mkdtempSync(path.join(tmpdir(), 'orgdata-samples-'));
    const entry = createRequire(path.join(ROOT, 'package.json')).resolve('@orgdata/client');
    expect(existsSync(entry), `${entry}: npm ci builds the client`).toBe(true);
    mkdirSync(path.join(work, 'node_modules/@orgdata'), { recursive: true });
    symlinkSync(realpathSync(path.join(ROOT, 'node_modules/@orgdata/client')), path.join(work, 'node_modules/@orgdata/client'));
  }, 60_000);

  /** The sample with the example ids replaced by the real ones (longest first: a link token contains a file id). */
  function substituted(source: string): string {
    let out = source;
    for (const [example, value] of [...real].sort(([a], [b]) => b.length - a.length)) out = out.replaceAll(example, value);
    return out;
  }

  function run(command: string, args: string[]): Promise<string> {
    return new Promise((resolve, reject) =>
      execFile(
        command,
        args,
        { cwd: work, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ORGDATA_API_KEY: suite.org.key } },
        (error, stdout, stderr) => (error ? reject(new Error(`${String(error)}\n${stdout}\n${stderr}`)) : resolve(stdout)),
      ),
    );
  }

  /** Runs an operation's curl sample through bash and answers its output. */
  const curl = (operationId: string) => run('bash', ['-c', substituted(curlOf(ops.get(operationId)!)!.source)]);
  const curlJson = async (operationId: string) => JSON.parse(await curl(operationId)) as Json;
  /** Runs an operation's client sample with tsx and answers its output. */
  async function client(operationId: string): Promise<string> {
    const file = path.join(work, `${operationId}.mts`);
    writeFileSync(file, substituted(clientOf(ops.get(operationId)!)!.source));
    // The repository's tsx (--no: never download one), run in the sample's directory.
    return run('npx', ['--no', '--prefix', ROOT, 'tsx', file]);
  }
  const idIn = (output: string, prefix: string) => new RegExp(`id: '(${prefix}_[A-Za-z0-9]+)'`).exec(output)?.[1];

  it('openapi.json by curl and by fetch', async () => {
    const fetched = await curlJson('getOpenApi');
    expect(fetched.info).toMatchObject({ title: 'orgdata API' });
    expect(await client('getOpenApi')).toMatch(/^orgdata API 1\.0\.0 - @orgdata\/client \d+\.\d+\.\d+/);
  });

  it('a label, a contact, read, listed, updated, and the label attached and detached', async () => {
    const label = await client('createLabel');
    expect(label).toContain("name: 'VIP'");
    real.set(EXAMPLE_IDS.label, idIn(label, 'lbl')!);

    const contact = await curlJson('createContact');
    expect(contact).toMatchObject({ object: 'contact', first_name: 'Ada', email: 'ada@example.com', labels: [] });
    real.set(EXAMPLE_IDS.contact, String(contact.id));

    const got = await client('getContact');
    expect(got).toContain(`id: '${String(contact.id)}'`);
    expect(got).toContain("email: 'ada@example.com'");
    expect(((await curlJson('getContact')) as Json).id).toBe(contact.id);

    expect(((await curlJson('listContacts')).data as Json[]).map((c) => c.id)).toEqual([contact.id]);
    expect(await client('listContacts')).toBe(`${String(contact.id)} ada@example.com\n`);

    expect(await client('updateContact')).toContain("notes: 'Prefers e-mail.'");
    expect(await curlJson('attachLabel')).toMatchObject({ id: contact.id, labels: [{ id: real.get(EXAMPLE_IDS.label) }] });
    expect(await curlJson('detachLabel')).toMatchObject({ id: contact.id, labels: [] });
    expect(await curlJson('attachLabel')).toMatchObject({ id: contact.id, labels: [{ id: real.get(EXAMPLE_IDS.label) }] });
  });

  it('a group and its member', async () => {
    const group = await curlJson('createGroup');
    expect(group).toMatchObject({ object: 'group', name: 'Newsletter', member_count: 0 });
    real.set(EXAMPLE_IDS.group, String(group.id));
    expect(await client('addGroupMembers')).toContain('member_count: 1');
    const contactId = real.get(EXAMPLE_IDS.contact)!;
    expect(((await curlJson('listGroupMembers')).data as Json[]).map((m) => m.contact_id)).toEqual([contactId]);
    expect(await client('listGroupMembers')).toMatch(new RegExp(`^${contactId} \\d{4}-\\d\\d-\\d\\dT`));
  });

  it('a file reserved, its bytes uploaded by curl, a download link, the bytes downloaded', async () => {
    const reservation = await curlJson('reserveFile');
    expect(reservation).toMatchObject({ object: 'file', status: 'pending', name: 'report.pdf', size: bytes.length });
    real.set(EXAMPLE_IDS.file, String(reservation.id));
    real.set(EXAMPLE_LINKS.uploadToken, String(reservation.upload_url).split('/uploads/')[1]!);

    writeFileSync(path.join(work, 'report.pdf'), bytes);
    const uploaded = await curlJson('uploadFile');
    expect(uploaded).toMatchObject({ id: reservation.id, status: 'ready', sha256: createHash('sha256').update(bytes).digest('hex') });

    expect(await client('getFileDownloadLink')).toContain(`file_id: '${String(reservation.id)}'`);
    const link = await curlJson('getFileDownloadLink');
    real.set(EXAMPLE_LINKS.downloadToken, String(link.url).split('/downloads/')[1]!);

    rmSync(path.join(work, 'report.pdf'));
    await curl('downloadFile');
    expect(readFileSync(path.join(work, 'report.pdf')).equals(bytes)).toBe(true);
    rmSync(path.join(work, 'report.pdf'));
    expect(await client('downloadFile')).toBe('200 application/pdf\n');
    expect(readFileSync(path.join(work, 'report.pdf')).equals(bytes)).toBe(true);

    // The client's upload: reserve and PUT in one call.
    const viaClient = await client('uploadFile');
    expect(viaClient).toContain("status: 'ready'");
    expect(viaClient).toContain(`sha256: '${createHash('sha256').update(bytes).digest('hex')}'`);
  });

  it('the events of all that', async () => {
    const types = ((await curlJson('listEvents')).data as Json[]).map((e) => e.type);
    expect(types).toEqual(
      expect.arrayContaining(['label.created', 'contact.created', 'contact.updated', 'group.created', 'file.uploaded']),
    );
    const lines = (await client('listEvents')).trim().split('\n');
    expect(lines.length).toBeGreaterThanOrEqual(3);
    for (const line of lines) expect(line).toMatch(new RegExp(`^\\S+ contact\\.\\w+ ${real.get(EXAMPLE_IDS.contact)!}$`));
  });
});
