import type { FastifyInstance, RouteOptions } from 'fastify';
import type { ErrorCode } from './errorCodes.js';
import { attachCodeSamples } from './openapi/codeSamples.js';
import { components } from './openapi/components.js';
import { attachExamples } from './openapi/attachExamples.js';
import { edgeErrorsSection } from './openapi/errorResponses.js';
import { operation } from './openapi/operation.js';
import { API_PREFIX, type Documented, type ServedRoute } from './openapi/routes.js';

type Json = Record<string, unknown>;

/**
 * Tags in the order a newcomer needs them, which is the order the reference lists them (and the
 * order of `paths`); an operation's tag must be declared here.
 */
const TAGS: Record<string, string> = {
  Contacts: 'People of the organisation.',
  Labels: 'Labels that contacts carry. Managing labels needs the `contacts:*` scopes.',
  Groups: 'Groups of contacts, and their members.',
  Files: 'Files: reserve an upload, PUT the bytes to its `upload_url`, then fetch short-lived download links.',
  Events:
    "Every change to the organisation's data, readable here and pushed to webhook endpoints (managed in the dashboard, not through the API).",
  'Uploads and downloads':
    'The links the Files operations hand out: PUT the bytes to an `upload_url`, GET them from a download `url`. They need no API key: the signed token in the path is the credential, for a short time.',
  Meta: 'The description of the API itself.',
};

/** Redoc's sidebar groups (`x-tagGroups`): the resources first, then the links and the API's own description. */
const TAG_GROUPS = [
  { name: 'Resources', tags: ['Contacts', 'Labels', 'Groups', 'Files', 'Events'] },
  { name: 'Links and meta', tags: ['Uploads and downloads', 'Meta'] },
];

const served = new WeakMap<FastifyInstance, ServedRoute[]>();

/** Every route the app registered (except HEAD), documented or not: lets tests prove nothing is left out of the document. */
export function servedRoutes(app: FastifyInstance): readonly ServedRoute[] {
  const routes = served.get(app);
  if (!routes) throw new Error('openApiCollector() was not installed on this app');
  return routes;
}

export interface DocumentSettings {
  /** PUBLIC_URL: where the API and its links are served. */
  publicUrl: string;
  /** MAX_FILE_BYTES: stated as the largest file a reservation may ask for. */
  maxFileBytes: number;
}

/** The OpenAPI 3.1 document, built from the schemas the routes validate with and this installation's settings. */
export function openApiCollector(app: FastifyInstance, { publicUrl, maxFileBytes }: DocumentSettings): () => Json {
  const routes: Documented[] = [];
  const all: ServedRoute[] = [];
  served.set(app, all);
  app.addHook('onRoute', (route: RouteOptions) => {
    const methods = (Array.isArray(route.method) ? route.method : [route.method]).filter((m) => m !== 'HEAD');
    const schema = route.schema as Json | undefined;
    for (const method of methods) all.push({ method, url: route.url, documented: Boolean(schema?.operationId) });
    if (!schema?.operationId) return;
    const config = route.config as { scope?: string; anyOfScopes?: string[] } | undefined;
    const scope = config?.scope;
    const anyOfScopes = config?.anyOfScopes;
    for (const method of methods) {
      routes.push({
        method: method.toLowerCase(),
        url: route.url,
        schema,
        scope,
        anyOfScopes,
        authenticated: scope !== undefined || anyOfScopes !== undefined,
        idempotent: method === 'POST' && scope !== undefined,
      });
    }
  });
  let document: Json | null = null;
  return () => {
    if (document) return document;
    const usedCodes = new Set<ErrorCode>();
    const paths: Record<string, Json> = {};
    // Paths in tag order (some renderers list operations as `paths` holds them), else as registered.
    const rank = (route: Documented) => {
      const index = Object.keys(TAGS).indexOf(((route.schema.tags ?? []) as string[])[0] ?? '');
      return index === -1 ? Infinity : index;
    };
    for (const route of routes.toSorted((a, b) => rank(a) - rank(b))) {
      // Routes outside /api/v1 (the upload and download links) are documented relative to PUBLIC_URL.
      const external = !route.url.startsWith(`${API_PREFIX}/`);
      const path = (external ? route.url : route.url.slice(API_PREFIX.length)).replace(/:([A-Za-z_]+)/g, '{$1}');
      paths[path] ??= external ? { servers: [{ url: publicUrl, description: 'Links the API returns; they need no API key.' }] } : {};
      paths[path][route.method] = operation(route, usedCodes);
    }
    const used = new Set(routes.flatMap((route) => (route.schema.tags ?? []) as string[]));
    const tags = [
      ...Object.entries(TAGS)
        .filter(([name]) => used.has(name))
        .map(([name, description]) => ({ name, description })),
      // Not declared in TAGS: listed without a description, which the OpenAPI lint refuses.
      ...[...used].filter((name) => !(name in TAGS)).map((name) => ({ name })),
    ];
    const schemas = components(publicUrl, usedCodes, paths);
    attachExamples(paths, schemas.schemas as Record<string, Json>, publicUrl);
    attachCodeSamples(paths, publicUrl);
    // The configured limit, so that the document states what this server enforces.
    const fileSize = ((((schemas.schemas as Json).FileCreate as Json | undefined)?.properties as Json | undefined)?.size ??
      null) as Json | null;
    if (fileSize) fileSize.maximum = maxFileBytes;
    document = {
      openapi: '3.1.0',
      info: {
        title: 'orgdata API',
        version: '1.0.0',
        description:
          "An organisation's contacts, labels, groups and files. Authenticate with `Authorization: Bearer od_live_…` " +
          "(or `od_test_…` for test mode: the same API on the organisation's sandbox, whose events say `livemode: false`). " +
          'Lists are cursor-paginated (`limit` 1–100, `cursor` from `next_cursor`). Unknown query parameters and body fields are refused (400). ' +
          'Bodies are JSON in valid UTF-8 with no key repeated in one object; query integers are plain decimal digits; a GET carries no body; HEAD is not served (405). ' +
          'Every POST accepts an Idempotency-Key (one header). Errors are RFC 9457 problem documents, also for requests the HTTP parser refuses (400, 408, 414, 431); ' +
          `every \`code\` is described at [/docs/api/errors](${publicUrl}/docs/api/errors).\n\n` +
          `[Dashboard](${publicUrl}/) · [Error codes](${publicUrl}/docs/api/errors) · [Official client](${publicUrl}/docs/client) · [openapi.json](${publicUrl}${API_PREFIX}/openapi.json)\n\n` +
          edgeErrorsSection(publicUrl),
        contact: { name: 'The operator of this orgdata installation', url: `${publicUrl}/docs` },
        license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' },
      },
      servers: [
        {
          url: `${publicUrl}${API_PREFIX}`,
          description: 'This installation, at its PUBLIC_URL: local by default, your staging or production URL once deployed.',
          'x-internal': false,
        },
      ],
      security: [{ apiKey: [] }],
      tags,
      'x-tagGroups': TAG_GROUPS.map((group) => ({ ...group, tags: group.tags.filter((name) => used.has(name)) })),
      paths,
      components: schemas,
    };
    return document;
  };
}
