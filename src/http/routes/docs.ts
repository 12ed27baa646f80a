import { readFile } from 'node:fs/promises';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { setPageHeaders } from '../../web/pageHeaders.js';
import { ERROR_CODES } from '../errorCodes.js';
import { marked } from 'marked';
import { DOCS_STYLE } from '../docsStyle.js';
import { EncodedAsset } from '../encodedAsset.js';
import { findRedocBundle, INIT_SCRIPT, INIT_SCRIPT_HASH, INIT_SCRIPT_URL, type RedocBundle } from '../redocAssets.js';
import { Problem } from '../schemas/problem.js';

/** The error and client pages carry their own inline styles and no script at all. */
function docHeaders(reply: FastifyReply): FastifyReply {
  setPageHeaders(reply, "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'");
  return reply;
}

/**
 * The reference page: Redoc and our script that starts it, from this origin only (no inline
 * script, no eval). It fetches the document from this origin, runs its search in a Web Worker it
 * makes from a blob: URL, and shows images inline (data:). Styles may be inline because Redoc's
 * styled-components writes its CSS into <style> elements at run time, which no hash can name
 * beforehand; a style cannot run code, and nothing may be fetched from another host.
 */
const REFERENCE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; worker-src blob:; " +
  "img-src 'self' data:; font-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

export interface DocsDeps {
  openApi: () => Record<string, unknown>;
  /** Redoc's bundle: found in node_modules or dist/ unless given (null: an installation without it). */
  redoc?: RedocBundle | null;
}

/** The machine-readable description, the human reference rendered from it, and the error list. */
export const docsRoutes: FastifyPluginAsync<DocsDeps> = async (app, { openApi, redoc = findRedocBundle() }) => {
  let openApiJson: Buffer | null = null;
  app.get('/api/v1/openapi.json', {
    schema: {
      operationId: 'getOpenApi',
      summary: 'This OpenAPI document',
      description:
        'The OpenAPI 3.1 description of this API, generated from the schemas that validate requests; a client can be generated from it. Needs no key (and refuses one sent in the URL).',
      tags: ['Meta'],
      security: [],
      response: {
        200: { type: 'object', additionalProperties: true, description: 'An OpenAPI 3.1 document.' },
        // A key anywhere in a URL is refused on every path, this one included.
        401: Problem,
      },
    },
    // The document is fixed once the app is built: serialized once, every answer the same Buffer.
    // Serialized per request, each answer was a fresh 235 KB string, and one 64 KB packet of
    // pipelined GETs (no key) made the server allocate ~650 MB before writing a byte: the send
    // timeout frees a connection's answers only if its client takes none (a hostile review's find).
    handler: async (_request, reply) => {
      openApiJson ??= Buffer.from(JSON.stringify(openApi()));
      return reply.type('application/json; charset=utf-8').send(openApiJson);
    },
  });

  const reference = redoc ? referencePage(redoc.url) : MISSING_RENDERER_PAGE;
  let clientReadme: string | null = null;
  app.get('/docs', async (_request, reply) => {
    setPageHeaders(reply, REFERENCE_CSP);
    return reply.type('text/html; charset=utf-8').send(reference);
  });
  // Named by version and by hash: a new one is a new URL, so browsers may keep these for good.
  // Sent compressed as the browser accepts (brotli, gzip; made at build): Redoc's bundle is 1.1 MB.
  const asset = (url: string, script: EncodedAsset) =>
    app.get(url, async (request, reply) => {
      setPageHeaders(reply, "default-src 'none'");
      const { body, encoding, etag } = script.for(request.headers['accept-encoding']);
      reply.header('cache-control', 'public, max-age=31536000, immutable').header('vary', 'Accept-Encoding').header('etag', etag);
      if (encoding) reply.header('content-encoding', encoding);
      reply.type('text/javascript; charset=utf-8');
      if (request.headers['if-none-match']?.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag))
        return reply.code(304).send();
      return reply.header('content-length', body.length).send(body);
    });
  if (redoc) asset(redoc.url, new EncodedAsset(redoc.script, redoc.hash, redoc.compressed));
  asset(INIT_SCRIPT_URL, new EncodedAsset(INIT_SCRIPT, INIT_SCRIPT_HASH));

  app.get('/docs/api/errors', async (_request, reply) => docHeaders(reply).type('text/html; charset=utf-8').send(ERRORS_PAGE));

  // The official client's README, shipped with the server (the dashboard's Developer page links here).
  app.get('/docs/client', async (_request, reply) => {
    clientReadme ??= await readFile(new URL('../../../client/README.md', import.meta.url), 'utf8').then(renderClientReadme, () => '');
    if (!clientReadme) return reply.code(404).type('text/plain; charset=utf-8').send('The client README is not part of this installation.');
    return docHeaders(reply).type('text/html; charset=utf-8').send(clientReadme);
  });
};

const PAGE_HEAD = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>API reference · orgdata</title>`;

/** A slim bar above Redoc: back to the dashboard, and the pages Redoc does not render. */
const REFERENCE_BAR = `<nav class="bar" aria-label="Documentation"><a href="/"><strong>orgdata</strong> dashboard</a><a href="/docs/api/errors">Error codes</a><a href="/docs/client">Official client</a><a href="/api/v1/openapi.json">openapi.json</a></nav>`;
const REFERENCE_STYLE = `body{margin:0;font-family:system-ui,sans-serif;color:#1f2328}
.bar{display:flex;flex-wrap:wrap;gap:.25rem 1.25rem;align-items:center;padding:.5rem 1rem;border-bottom:1px solid #d1d9e0;background:#fff;font-size:14px}
.bar a{color:#0969da;text-decoration:none}.bar a:hover{text-decoration:underline}.bar a:first-child{color:#1f2328;margin-right:auto}
.missing{max-width:50rem;margin:2rem auto;padding:0 1rem;line-height:1.5}
:focus-visible{outline:3px solid #0969da!important;outline-offset:2px}#redoc pre:focus-visible,#redoc [data-orgdata-region]:focus-visible{outline-color:#79c0ff!important;outline-offset:-3px}`;

function referencePage(bundleUrl: string): string {
  return `${PAGE_HEAD}
<style>${REFERENCE_STYLE}</style>
<script src="${bundleUrl}" defer></script><script src="${INIT_SCRIPT_URL}" defer></script></head>
<body>${REFERENCE_BAR}<div id="redoc"><p class="missing">Loading the API reference… It needs JavaScript; the document itself is <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</p></div></body></html>`;
}

/** An installation without Redoc's bundle (neither in node_modules nor in dist/): says so instead of failing. */
const MISSING_RENDERER_PAGE = `${PAGE_HEAD}
<style>${REFERENCE_STYLE}</style></head>
<body>${REFERENCE_BAR}<main class="missing"><h1>API reference</h1>
<p>The reference's script (Redoc) is not part of this installation, so it cannot be shown here. The API is described in full by its OpenAPI document,
<a href="/api/v1/openapi.json">/api/v1/openapi.json</a>, which any OpenAPI viewer opens; every error code is explained at <a href="/docs/api/errors">/docs/api/errors</a>.</p>
<p>To the operator: the build copies the script into <code>dist/assets/redoc</code> (<code>npm run build</code> with the dev dependencies installed).</p></main></body></html>`;

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * The client's README as a page. The markdown is ours (shipped in the package, never a user's),
 * rendered by marked; the page's CSP allows no script whatever it holds.
 */
function renderClientReadme(markdown: string): string {
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Official client · orgdata API</title>
<style>${DOCS_STYLE}</style></head>
<body><p><a href="/docs">API reference</a> · <a href="/docs/api/errors">Error codes</a></p>
${marked.parse(markdown, { async: false })}
</body></html>`;
}
const inlineCode = (text: string) => escape(text).replace(/`([^`]+)`/g, '<code>$1</code>');

const ERRORS_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Error codes · orgdata API</title>
<style>${DOCS_STYLE}
section{border-top:1px solid #d0d7de;padding:.75rem 0}h2{font-size:1.1rem;margin:.2rem 0}code{background:#f6f8fa;padding:.1rem .3rem;border-radius:4px}
.status{color:#57606a;font-weight:normal}:target{background:#fff8c5}</style></head>
<body><h1>Error codes</h1>
<p>Every error is an RFC 9457 <code>application/problem+json</code> document with <code>type</code>, <code>title</code>, <code>status</code>,
<code>code</code>, <code>detail</code> and <code>request_id</code>. Its <code>type</code> links to the entry below. Back to the <a href="/docs">API reference</a>.</p>
${Object.entries(ERROR_CODES)
  .map(
    ([code, info]) =>
      `<section id="${code}"><h2><a href="#${code}"><code>${code}</code></a> <span class="status">${info.status}</span></h2><p>${inlineCode(info.summary)}</p></section>`,
  )
  .join('\n')}
</body></html>`;
