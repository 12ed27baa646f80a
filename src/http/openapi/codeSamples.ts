import { API_PREFIX } from './routes.js';

/**
 * `x-codeSamples` (Redoc's extension) on every operation: a curl command derived from the
 * operation itself (method, URL with the example ids, headers, the request example) and a sample
 * of the official client (`@orgdata/client`) from the table below, keyed by operationId. Both use
 * the example ids of examples.ts, so a sample can be run by replacing them with real ones.
 */

type Json = Record<string, unknown>;

/** What a client sample is written from: the request example and the path parameters, as TypeScript literals. */
export interface SampleValues {
  /** The request body's example, as an object literal. */
  body: string;
  /** The request body's example itself. */
  example: Json;
  /** A path parameter's example, as a string literal; `file_id` is the file a link's `token` names. */
  param(name: string): string;
  /** The operation's full URL with the example parameters, as a string literal (for operations the client has no method for). */
  url: string;
}

interface ClientSample {
  /** Import lines besides the client's own. */
  imports?: string[];
  /** Needs no `Orgdata` instance (the operation is not one the client makes). */
  noClient?: boolean;
  code(values: SampleValues): string;
}

const print = (name: string, call: string) => `const ${name} = await ${call};\nconsole.log(${name});`;
const walk = (name: string, call: string, fields: string) => `for await (const ${name} of ${call}) {\n  console.log(${fields});\n}`;

/** The client call of each operation. */
export const CLIENT_SAMPLES: Record<string, ClientSample> = {
  listContacts: { code: () => walk('contact', 'orgdata.contacts.list({ limit: 100 })', 'contact.id, contact.email') },
  createContact: { code: (v) => print('contact', `orgdata.contacts.create(${v.body})`) },
  batchContacts: { code: (v) => print('result', `orgdata.contacts.batch(${v.body})`) },
  getContact: { code: (v) => print('contact', `orgdata.contacts.get(${v.param('id')})`) },
  updateContact: { code: (v) => print('contact', `orgdata.contacts.update(${v.param('id')}, ${v.body})`) },
  deleteContact: { code: (v) => print('deleted', `orgdata.contacts.delete(${v.param('id')})`) },
  attachLabel: { code: (v) => print('contact', `orgdata.contacts.labels.attach(${v.param('id')}, ${v.param('label_id')})`) },
  detachLabel: { code: (v) => print('contact', `orgdata.contacts.labels.detach(${v.param('id')}, ${v.param('label_id')})`) },
  listLabels: { code: () => walk('label', 'orgdata.labels.list()', 'label.id, label.name') },
  createLabel: { code: (v) => print('label', `orgdata.labels.create(${v.body})`) },
  getLabel: { code: (v) => print('label', `orgdata.labels.get(${v.param('id')})`) },
  updateLabel: { code: (v) => print('label', `orgdata.labels.update(${v.param('id')}, ${v.body})`) },
  deleteLabel: { code: (v) => print('deleted', `orgdata.labels.delete(${v.param('id')})`) },
  listGroups: { code: () => walk('group', 'orgdata.groups.list()', 'group.id, group.name, group.member_count') },
  createGroup: { code: (v) => print('group', `orgdata.groups.create(${v.body})`) },
  getGroup: { code: (v) => print('group', `orgdata.groups.get(${v.param('id')})`) },
  updateGroup: { code: (v) => print('group', `orgdata.groups.update(${v.param('id')}, ${v.body})`) },
  deleteGroup: { code: (v) => print('deleted', `orgdata.groups.delete(${v.param('id')})`) },
  listGroupMembers: {
    code: (v) => walk('member', `orgdata.groups.members.list(${v.param('id')})`, 'member.contact_id, member.added_at'),
  },
  addGroupMembers: {
    code: (v) => print('group', `orgdata.groups.members.add(${v.param('id')}, ${literal(v.example.contact_ids)})`),
  },
  removeGroupMember: { code: (v) => print('removed', `orgdata.groups.members.remove(${v.param('id')}, ${v.param('contact_id')})`) },
  listFiles: { code: () => walk('file', "orgdata.files.list({ status: 'ready' })", 'file.id, file.name, file.size') },
  reserveFile: { code: (v) => print('reservation', `orgdata.files.reserve(${v.body})`) },
  getFile: { code: (v) => print('file', `orgdata.files.get(${v.param('id')})`) },
  deleteFile: { code: (v) => print('deleted', `orgdata.files.delete(${v.param('id')})`) },
  getFileDownloadLink: { code: (v) => print('link', `orgdata.files.downloadUrl(${v.param('id')})`) },
  uploadFile: {
    imports: ["import { readFile } from 'node:fs/promises';"],
    // The client reserves the file, PUTs the bytes to its upload_url and answers the ready file.
    code: () =>
      '// Reserves the file (POST /files), PUTs the bytes to its upload_url, answers the ready file.\n' +
      print('file', "orgdata.files.upload({ name: 'report.pdf', contentType: 'application/pdf', body: await readFile('report.pdf') })"),
  },
  downloadFile: {
    imports: ["import { writeFile } from 'node:fs/promises';"],
    code: (v) =>
      `// A fresh link to the bytes (GET /files/{id}/download), then the bytes: no API key needed.\n` +
      `const link = await orgdata.files.downloadUrl(${v.param('file_id')});\n` +
      'const res = await fetch(link.url);\n' +
      "await writeFile('report.pdf', Buffer.from(await res.arrayBuffer()));\n" +
      "console.log(res.status, res.headers.get('content-type'));",
  },
  listEvents: {
    code: () => walk('event', "orgdata.events.list({ type: 'contact.*' })", 'event.created_at, event.type, event.data.object.id'),
  },
  getEvent: { code: (v) => print('event', `orgdata.events.get(${v.param('id')})`) },
  getOpenApi: {
    imports: ["import { VERSION } from '@orgdata/client';"],
    noClient: true,
    // The client's types are generated from this document; reading the document itself needs no key.
    code: (v) =>
      `const res = await fetch(${v.url});\n` +
      'const doc = await res.json();\n' +
      "console.log(doc.info.title, doc.info.version, '- @orgdata/client', VERSION);",
  },
};

/** A value as a TypeScript literal: single-quoted strings, bare keys, on one line when it is short. */
export function literal(value: unknown, indent = ''): string {
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const key = (k: string) => (/^[A-Za-z_$][\w$]*$/.test(k) ? k : literal(k));
  const inner = indent + '  ';
  const entries = Array.isArray(value)
    ? value.map((item) => literal(item, inner))
    : Object.entries(value).map(([k, v]) => `${key(k)}: ${literal(v, inner)}`);
  const [open, close] = Array.isArray(value) ? ['[', ']'] : ['{ ', ' }'];
  if (entries.length === 0) return Array.isArray(value) ? '[]' : '{}';
  const oneLine = `${open}${entries.join(', ')}${close}`;
  if (oneLine.length + indent.length <= 100 && !oneLine.includes('\n')) return oneLine;
  return `${open.trim()}\n${entries.map((e) => `${inner}${e},`).join('\n')}\n${indent}${close.trim()}`;
}

/** POSIX shell single quotes. */
const shellQuote = (text: string) => `'${text.replace(/'/g, `'\\''`)}'`;

function curl(method: string, url: string, op: Json): string {
  const authenticated = Array.isArray(op.security) && op.security.length > 0;
  const body = ((op.requestBody as Json | undefined)?.content as Record<string, Json> | undefined)?.['application/json']?.example;
  const idempotent = ((op.parameters ?? []) as Json[]).some((p) => p.$ref === '#/components/parameters/IdempotencyKey');
  const parts = [`curl -sS${method === 'GET' ? '' : ` -X ${method}`} "${url}"`];
  if (authenticated) parts.push('-H "Authorization: Bearer $ORGDATA_API_KEY"');
  if (body !== undefined) parts.push('-H "Content-Type: application/json"');
  if (idempotent) parts.push('-H "Idempotency-Key: $IDEMPOTENCY_KEY"');
  // Indented under the command; the spaces are JSON whitespace.
  if (body !== undefined) parts.push(`-d ${shellQuote(JSON.stringify(body, null, 2).replace(/\n/g, '\n  '))}`);
  // The link operations move bytes: the file's own type up, the bytes into a file down.
  if (op.operationId === 'uploadFile') parts.push('-H "Content-Type: application/pdf"', '--data-binary @report.pdf');
  if (op.operationId === 'downloadFile') parts.push('-o report.pdf');
  const command = parts.join(' \\\n  ');
  // A fresh key each time the sample is pasted: one fixed key would make a second paste with another
  // body an idempotency_key_reused error for 24 hours. Send the same key again only to retry.
  return idempotent ? `IDEMPOTENCY_KEY=$(node -p 'crypto.randomUUID()')  # reuse it only to retry this request\n${command}` : command;
}

function clientSource(sample: ClientSample, values: SampleValues, apiUrl: string): string {
  const imports = sample.noClient ? (sample.imports ?? []) : ["import { Orgdata } from '@orgdata/client';", ...(sample.imports ?? [])];
  const setup = sample.noClient
    ? []
    : [`const orgdata = new Orgdata({ apiKey: process.env.ORGDATA_API_KEY, baseUrl: ${literal(apiUrl)} });`, ''];
  // An ES module (import, top-level await): a project made by `npm init -y` is CommonJS, hence the .mjs.
  return ['// sample.mjs (Node 20+): run with node sample.mjs', ...imports, '', ...setup, sample.code(values), ''].join('\n');
}

const HTTP_METHODS = new Set(['get', 'put', 'post', 'patch', 'delete']);

/** Adds `x-codeSamples` to every operation of `paths` (after attachExamples, whose examples it uses). */
export function attachCodeSamples(paths: Record<string, Json>, publicUrl: string): void {
  const apiUrl = `${publicUrl}${API_PREFIX}`;
  for (const [path, item] of Object.entries(paths)) {
    // The link operations have their own server (PUBLIC_URL): see openapi.ts.
    const base = Array.isArray(item.servers) ? String((item.servers[0] as Json).url) : apiUrl;
    for (const [method, op] of Object.entries(item) as [string, Json][]) {
      if (!HTTP_METHODS.has(method)) continue;
      const operationId = String(op.operationId);
      // An operation missing from the table gets its curl sample only: test/codeSamples.test.ts fails on it.
      const sample = CLIENT_SAMPLES[operationId];
      const parameters = ((op.parameters ?? []) as Json[]).filter((p) => p.in === 'path');
      const value = (name: string) => String(parameters.find((p) => p.name === name)?.example ?? `{${name}}`);
      const url = base + path.replace(/\{([^}]+)\}/g, (_, name: string) => value(name));
      const body = ((op.requestBody as Json | undefined)?.content as Record<string, Json> | undefined)?.['application/json']?.example;
      const values: SampleValues = {
        body: literal(body),
        example: (body ?? {}) as Json,
        param: (name) => literal(name === 'file_id' ? fileIdOf(value('token')) : value(name)),
        url: literal(url),
      };
      op['x-codeSamples'] = [
        { lang: 'Shell', label: 'curl', source: curl(method.toUpperCase(), url, op) },
        ...(sample ? [{ lang: 'TypeScript', label: 'TypeScript (@orgdata/client)', source: clientSource(sample, values, apiUrl) }] : []),
      ];
    }
  }
}

/** The file a link token names: its first part (domain/files/links.ts). */
const fileIdOf = (token: string) => token.split('.')[0]!;
