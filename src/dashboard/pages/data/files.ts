import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { FileStatus } from '../../../db/schema.js';
import { NotFoundError, ServiceError } from '../../../domain/errors.js';
import { deleteFile, downloadLink, getFile, listFiles, reserveFile, type FileView } from '../../../domain/files/files.js';
import { decodeCursor, encodeCursor } from '../../../domain/pagination.js';
import { statusOf } from '../../../web/errorStatus.js';
import { checkCsrf, ctxOf, flash, takeFlash, text } from '../../context.js';
import { emptyState, html, type Html } from '../../html.js';
import { icon } from '../../icons.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';

const PAGE_SIZE = 25;
const STATUSES: { value: FileStatus | ''; label: string }[] = [
  { value: '', label: 'All' },
  { value: 'pending', label: 'Pending' },
  { value: 'ready', label: 'Ready' },
];

function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** 1536 → "1.5 KB": binary multiples, as file managers show them. */
export function humanSize(bytes: number): string {
  const units = ['bytes', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  if (unit === 0) return bytes === 1 ? '1 byte' : `${bytes} bytes`;
  return `${value >= 10 ? Math.round(value) : Math.round(value * 10) / 10} ${units[unit]}`;
}

function statusFilter(value: string): FileStatus | '' {
  return STATUSES.find((s) => s.value === value)?.value ?? '';
}

/** The notice after an upload; an unknown or foreign id just shows no notice. */
async function uploadedNotice(request: FastifyRequest, db: DashboardDeps['db']): Promise<string | null> {
  const id = text(request.query, 'uploaded');
  if (!id) return null;
  try {
    return `Uploaded ${(await getFile(ctxOf(request, db), id)).name}.`;
  } catch (error) {
    if (error instanceof NotFoundError) return null;
    throw error;
  }
}

function fileRow(file: FileView): Html {
  return html`<tr>
    <td>${file.name}</td>
    <td><code>${file.content_type}</code></td>
    <td>${humanSize(file.size)}</td>
    <td>${file.status === 'ready' ? 'Ready' : 'Pending'}</td>
    <td>
      ${file.uploaded_at ? html`<time datetime="${file.uploaded_at}">${file.uploaded_at.slice(0, 16).replace('T', ' ')}</time>` : html`<span class="muted">not yet</span>`}
    </td>
    <td>${file.sha256 ? html`<code title="${file.sha256}">${file.sha256.slice(0, 12)}</code>` : ''}</td>
    <td class="actions">
      ${
        file.status === 'ready'
          ? html`<a class="button secondary" href="/files/${file.id}/download"
              >Download<span class="visually-hidden"> ${file.name}</span></a
            > `
          : ''
      }<a class="button secondary" href="/files/${file.id}/delete">Delete<span class="visually-hidden"> ${file.name}</span></a>
    </td>
  </tr>`;
}

export const filePages: FastifyPluginAsync<DashboardDeps> = async (app, { db, secret, files }) => {
  app.get('/files', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const session = request.session!;
    const status = statusFilter(text(request.query, 'status'));
    const binding = JSON.stringify(['dashboard:files', ctx.orgId, status]);
    const cursor = text(request.query, 'cursor');
    const after = cursor ? decodeCursor(secret, binding, cursor) : null;
    const [result, uploaded] = await Promise.all([
      listFiles(ctx, { limit: PAGE_SIZE, after }, { status: status || undefined }),
      uploadedNotice(request, db),
    ]);
    const last = result.items.at(-1);
    const next = result.hasMore && last ? encodeCursor(secret, binding, { createdAt: last.created_at, id: last.id }) : null;
    const query = (extra: Record<string, string>) => new URLSearchParams({ ...(status ? { status } : {}), ...extra }).toString();
    return send(
      reply,
      200,
      page({
        title: 'Files',
        session,
        section: 'files',
        notice: takeFlash(request, reply) ?? uploaded,
        body: html`<h1>Files</h1>
          <section class="card" aria-labelledby="upload-title">
            <h2 id="upload-title">Upload a file</h2>
            <form data-upload class="row">
              ${csrf(session)}
              <div class="field">
                <label for="upload-file">File</label><input type="file" id="upload-file" name="file" aria-describedby="upload-hint" />
              </div>
              <button type="submit">Upload</button>
              <p data-status role="status" class="upload-status"></p>
            </form>
            <p class="hint" id="upload-hint">
              Up to ${humanSize(files.maxFileBytes)}. The file is stored once its last byte arrives; until then it is listed as pending.
            </p>
            <noscript
              ><p class="warning">Uploading needs JavaScript; the API's <code>POST /api/v1/files</code> works without it.</p></noscript
            >
          </section>
          <h2>All files</h2>
          <form method="get" action="/files" class="row">
            <div class="field">
              <label for="status-filter">Status</label
              ><select id="status-filter" name="status">
                ${STATUSES.map((s) => html`<option value="${s.value}" ${s.value === status ? html`selected` : ''}>${s.label}</option>`)}
              </select>
            </div>
            <button type="submit" class="secondary">Filter</button>
          </form>
          ${
            result.items.length === 0
              ? status || cursor
                ? emptyState('No file matches.', 'Choose another status, or show every file.')
                : emptyState('No files yet.', 'Upload one with Upload a file above, or through the API.')
              : html`<table>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Type</th>
                      <th scope="col">Size</th>
                      <th scope="col">Status</th>
                      <th scope="col">Uploaded</th>
                      <th scope="col">SHA-256</th>
                      <th scope="col">Actions</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${result.items.map(fileRow)}
                  </tbody>
                </table>`
          }
          <nav class="pager" aria-label="Pages">
            ${cursor ? html`<a class="button secondary" href="/files?${query({})}">First page</a>` : ''}${
              next ? html`<a class="button secondary" href="/files?${query({ cursor: next })}">Next page</a>` : ''
            }
          </nav>`,
      }),
    );
  });

  // Called by the upload script (assets.ts): answers JSON, never an HTML page.
  app.post('/files/reserve', async (request, reply) => {
    const body = request.body;
    const size = text(body, 'size');
    try {
      // The pages scope checks urlencoded forms already; check again so no other body type slips by.
      checkCsrf(request, text(body, '_csrf'));
      const file = await reserveFile(ctxOf(request, db), files, {
        name: text(body, 'name'),
        content_type: text(body, 'content_type'),
        size: size.trim() === '' ? NaN : Number(size),
      });
      return reply.code(201).type('application/json').send({ id: file.id, upload_url: file.upload_url });
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      return reply.code(statusOf(error)).type('application/json').send({ message: error.message });
    }
  });

  app.get<{ Params: { id: string } }>('/files/:id/download', async (request, reply) => {
    const link = await downloadLink(ctxOf(request, db), files, request.params.id);
    return reply.redirect(link.url, 303);
  });

  app.get<{ Params: { id: string } }>('/files/:id/delete', async (request, reply) => {
    const file = await getFile(ctxOf(request, db), request.params.id);
    const session = request.session!;
    return send(
      reply,
      200,
      page({
        title: `Delete ${file.name}`,
        session,
        section: 'files',
        body: html`<p><a href="/files">← Files</a></p>
          <h1>Delete the file ${file.name}?</h1>
          <p class="muted">
            ${file.content_type} · ${humanSize(file.size)} ·
            ${file.status === 'ready' ? html`uploaded <span class="nowrap">${file.uploaded_at?.slice(0, 10) ?? ''}</span>` : 'pending'}
          </p>
          <div class="warning">The file and its bytes are deleted, and its download links stop working. This cannot be undone.</div>
          <form method="post" action="/files/${file.id}/delete" class="row">
            ${csrf(session)}
            <button type="submit" class="danger">${icon('trash-2')}Delete file</button>
            <a class="button secondary" href="/files">Cancel</a>
          </form>`,
      }),
    );
  });

  app.post<{ Params: { id: string } }>('/files/:id/delete', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const file = await getFile(ctx, request.params.id);
    await deleteFile(ctx, files, file.id);
    flash(reply, `Deleted ${file.name}.`);
    return reply.redirect('/files', 303);
  });
};
