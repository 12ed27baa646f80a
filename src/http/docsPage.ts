type Json = Record<string, unknown>;

const HTTP_METHODS = new Set(['get', 'put', 'post', 'patch', 'delete', 'head', 'options', 'trace']);

/** The reference pages' one stylesheet (inline: their CSP allows no other), readable from 320 px up. */
export const DOCS_STYLE = `body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1f2328;overflow-wrap:anywhere}
code{background:#f6f8fa;padding:.1rem .3rem;border-radius:4px}pre{background:#f6f8fa;padding:.6rem .8rem;border-radius:6px;overflow-x:auto}
pre code{padding:0;overflow-wrap:normal}table{border-collapse:collapse;width:100%;margin:.5rem 0;display:block;overflow-x:auto}
td,th{border:1px solid #d0d7de;padding:.3rem .5rem;text-align:left;vertical-align:top}.op{border-top:1px solid #d0d7de;padding-top:.5rem}
.method{font:bold 13px monospace;padding:.1rem .4rem;border-radius:4px;color:#fff;background:#57606a}.get{background:#1f6feb}.post{background:#1a7f37}
.patch{background:#9a6700}.delete{background:#cf222e}.put{background:#8250df}
@media (max-width:40rem){body{margin:1rem auto;padding:0 .75rem}}`;

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const prose = (text: unknown) =>
  escape(String(text ?? ''))
    .replace(/`([^`]+)`/g, '<code>$1</code>')
    .replace(/\n\n/g, '</p><p>');

/** Follows a local `$ref` (`#/components/<kind>/<name>`) to what it names. */
function resolve(doc: Json, object: Json | undefined): Json {
  const ref = object?.$ref;
  if (typeof ref !== 'string') return object ?? {};
  const [, , kind = '', name = ''] = ref.split('/');
  return (((doc.components as Json)[kind] ?? {}) as Json)[name] as Json;
}

function typeOf(doc: Json, schema: Json): string {
  if (typeof schema.$ref === 'string')
    return `<a href="#schema-${escape(schema.$ref.split('/').pop() ?? '')}">${escape(schema.$ref.split('/').pop() ?? '')}</a>`;
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as Json[]).map((s) => typeOf(doc, s)).join(' or ');
  if (schema.const !== undefined) return `<code>${escape(JSON.stringify(schema.const))}</code>`;
  if (schema.type === 'array') return `array of ${typeOf(doc, (schema.items ?? {}) as Json)}`;
  return escape(String(schema.type ?? 'any'));
}

function fieldTable(doc: Json, schema: Json): string {
  const properties = (schema.properties ?? {}) as Record<string, Json>;
  const required = new Set((schema.required ?? []) as string[]);
  const rows = Object.entries(properties).map(([name, prop]) => {
    const limits = [
      prop.maxLength !== undefined ? `≤ ${String(prop.maxLength)} chars` : '',
      prop.maxItems !== undefined ? `≤ ${String(prop.maxItems)} items` : '',
    ]
      .filter(Boolean)
      .join(', ');
    return `<tr><td><code>${escape(name)}</code>${required.has(name) ? ' <em>required</em>' : ''}</td><td>${typeOf(doc, prop)}</td><td>${prose(prop.description)} ${limits}</td></tr>`;
  });
  return rows.length ? `<table><tr><th>Field</th><th>Type</th><th>Notes</th></tr>${rows.join('')}</table>` : '';
}

/**
 * The human-readable API reference, rendered on the server from the OpenAPI document: no
 * JavaScript and nothing fetched from elsewhere, so it works on a machine without internet access.
 */
export function renderReference(doc: Json): string {
  const paths = doc.paths as Record<string, Record<string, Json>>;
  // A path item holds its operations and, for the upload and download links, `servers`: only the first are operations.
  const operations = Object.entries(paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => HTTP_METHODS.has(method))
      .map(([method, op]) => ({ path, method, op })),
  );
  const tags = [...new Set(operations.flatMap(({ op }) => (op.tags as string[] | undefined) ?? ['Other']))];
  const server = ((doc.servers as Json[])[0]?.url as string) ?? '';
  const sections = tags.map((tag) => {
    const ops = operations.filter(({ op }) => ((op.tags as string[] | undefined) ?? ['Other']).includes(tag));
    return `<h2 id="tag-${escape(tag)}">${escape(tag)}</h2>${ops
      .map(({ path, method, op }) => {
        const params = ((op.parameters ?? []) as Json[]).map((p) => resolve(doc, p));
        const body = ((op.requestBody as Json | undefined)?.content as Json | undefined)?.['application/json'] as Json | undefined;
        const responses = Object.entries((op.responses ?? {}) as Record<string, Json>);
        return `<section class="op" id="${escape(String(op.operationId))}">
<h3><span class="method ${method}">${method.toUpperCase()}</span> <code>${escape(path)}</code> — ${escape(String(op.summary ?? ''))}</h3>
<p>${prose(op.description)}</p>
${params.length ? `<h4>Parameters</h4><table><tr><th>Name</th><th>In</th><th>Notes</th></tr>${params.map((p) => `<tr><td><code>${escape(String(p.name))}</code>${p.required ? ' <em>required</em>' : ''}</td><td>${escape(String(p.in))}</td><td>${prose(p.description)}</td></tr>`).join('')}</table>` : ''}
${body ? `<h4>Body</h4>${fieldTable(doc, resolve(doc, body.schema as Json))}` : ''}
<h4>Responses</h4><ul>${responses
          .map(([status, r]) => {
            const media = Object.entries((r.content ?? {}) as Record<string, Json>)[0];
            const shape = media ? ` <code>${escape(media[0])}</code> ${typeOf(doc, (media[1].schema ?? {}) as Json)}` : '';
            // Error responses name their codes: link each to its entry in the error reference.
            const text =
              Number(status) >= 400
                ? prose(r.description).replace(/<code>([a-z_]+)<\/code>/g, '<a href="/docs/api/errors#$1"><code>$1</code></a>')
                : prose(r.description);
            return `<li><strong>${escape(status)}</strong>${shape} — ${text}</li>`;
          })
          .join('')}</ul>
</section>`;
      })
      .join('\n')}`;
  });
  const schemas = Object.entries(((doc.components as Json).schemas ?? {}) as Record<string, Json>)
    .map(
      ([name, schema]) =>
        `<section id="schema-${escape(name)}"><h3>${escape(name)}</h3><p>${prose(schema.description)}</p>${fieldTable(doc, schema)}</section>`,
    )
    .join('\n');
  const info = doc.info as Json;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(String(info.title))} reference</title>
<style>${DOCS_STYLE}</style></head>
<body><h1>${escape(String(info.title))} <small>v${escape(String(info.version))}</small></h1>
<p>${prose(info.description)}</p>
<p>Base URL: <code>${escape(server)}</code> · <a href="/api/v1/openapi.json">openapi.json</a> · <a href="/docs/api/errors">Error codes</a></p>
<nav><ul>${tags.map((t) => `<li><a href="#tag-${escape(t)}">${escape(t)}</a></li>`).join('')}<li><a href="#schemas">Schemas</a></li></ul></nav>
${sections.join('\n')}
<h2 id="schemas">Schemas</h2>
${schemas}
</body></html>`;
}
