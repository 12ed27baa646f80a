import { readFile } from 'node:fs/promises';
import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import { setPageHeaders } from '../../web/pageHeaders.js';
import { ERROR_CODES } from '../errorCodes.js';
import { marked } from 'marked';
import { DOCS_STYLE, renderReference } from '../docsPage.js';
import { Problem } from '../schemas/problem.js';

/** The reference pages carry their own inline styles and no script at all. */
function docHeaders(reply: FastifyReply): FastifyReply {
  setPageHeaders(reply, "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'");
  return reply;
}

export interface DocsDeps {
  openApi: () => Record<string, unknown>;
}

/** The machine-readable description, the human reference rendered from it, and the error list. */
export const docsRoutes: FastifyPluginAsync<DocsDeps> = async (app, { openApi }) => {
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
    handler: async () => openApi(),
  });

  let reference: string | null = null;
  let clientReadme: string | null = null;
  app.get('/docs', async (_request, reply) => {
    reference ??= renderReference(openApi());
    return docHeaders(reply).type('text/html; charset=utf-8').send(reference);
  });

  app.get('/docs/api/errors', async (_request, reply) => docHeaders(reply).type('text/html; charset=utf-8').send(ERRORS_PAGE));

  // The official client's README, shipped with the server (the dashboard's Developer page links here).
  app.get('/docs/client', async (_request, reply) => {
    clientReadme ??= await readFile(new URL('../../../client/README.md', import.meta.url), 'utf8').then(renderClientReadme, () => '');
    if (!clientReadme) return reply.code(404).type('text/plain; charset=utf-8').send('The client README is not part of this installation.');
    return docHeaders(reply).type('text/html; charset=utf-8').send(clientReadme);
  });
};

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
