import multipart from '@fastify/multipart';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import {
  decodeCsv,
  IMPORT_COLUMNS,
  importContacts,
  MAX_IMPORT_ROWS,
  type ImportResult,
  type ImportRowResult,
} from '../../../domain/contacts/import.js';
import { ServiceError, ValidationError } from '../../../domain/errors.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { checkCsrf, ctxOf } from '../../context.js';
import { formatNumber, html, plural, type Html } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { answeredBeforeBody } from '../../../web/answeredBeforeBody.js';

const megabytes = (bytes: number) => `${Math.round((bytes / (1024 * 1024)) * 10) / 10} MB`;

function importForm(session: SessionView, maxBytes: number, options: { error?: string; partial?: boolean } = {}): Html {
  const { error } = options;
  // The CSRF field comes first: the server checks it before it reads the file.
  return html`<form method="post" action="/import" enctype="multipart/form-data" novalidate>
    ${csrf(session)}
    <div class="field${error ? ' has-error' : ''}">
      <label for="f-file">CSV file</label>
      <input
        type="file"
        id="f-file"
        name="file"
        accept=".csv,text/csv"
        required
        aria-describedby="f-file-hint${error ? ' f-file-error' : ''}"
        ${error ? html` aria-invalid="true"` : ''}
      />
      <p class="hint" id="f-file-hint">UTF-8 CSV, at most ${formatNumber(MAX_IMPORT_ROWS)} rows and ${megabytes(maxBytes)}.</p>
      ${error ? html`<p class="error" id="f-file-error">${error}</p>` : ''}
    </div>
    <div class="field">
      <label
        ><input type="checkbox" name="partial" value="yes" ${options.partial ? html` checked` : ''} /> Import the valid rows even if some
        are refused</label
      >
      <p class="hint">Unticked, the import is all or nothing: if any row is refused, no contact is created.</p>
    </div>
    <button type="submit">Import</button>
  </form>`;
}

function explanation(): Html {
  return html`<p>
      The first row names the columns. Accepted columns: ${IMPORT_COLUMNS.map((c, i) => html`${i ? ', ' : ''}<code>${c}</code>`)}.
      <code>first_name</code> and <code>email</code> are required. Each row is checked like a contact made by hand; a row whose email is
      already used by a contact, or appears earlier in the file, is refused.
    </p>
    <p>
      <code>labels</code> holds label names separated by semicolons, e.g. <code>Volunteer;Donor</code>. Only existing labels can be used: an
      unknown name refuses the row. <a href="/labels">Create labels first</a> if needed.
    </p>
    <pre class="example"><code>first_name,last_name,email,phone,labels
Ada,Lovelace,ada@example.com,+44 20 7946 0000,Volunteer;Donor</code></pre>`;
}

const STATUS_TEXT: Record<ImportRowResult['status'], string> = {
  created: 'Created',
  would_be_created: 'Valid, not imported',
  refused: 'Refused',
};

function resultRow(r: ImportRowResult): Html {
  return html`<tr class="import-${r.status}">
    <td>${r.row}</td>
    <td>${STATUS_TEXT[r.status]}</td>
    <td>${r.id ? html`<a href="/contacts/${r.id}">${r.name || r.email}</a>` : r.name}</td>
    <td>${r.email}</td>
    <td>
      ${
        r.reasons.length
          ? html`<ul class="reasons">
              ${r.reasons.map((reason) => html`<li>${reason}</li>`)}
            </ul>`
          : ''
      }
    </td>
  </tr>`;
}

/** What happened, in one or two sentences. */
function outcomeText(result: ImportResult): string {
  const { counts } = result;
  const refused = plural(counts.refused, 'row was', 'rows were');
  if (result.written) {
    return (
      `Imported ${plural(counts.created, 'contact')}.` +
      (counts.refused ? ` ${refused} refused and not imported; see the reasons below.` : '')
    );
  }
  if (counts.would_be_created === 0) return 'Nothing was imported: every row was refused. See the reasons below.';
  const valid = `${plural(counts.would_be_created, 'valid row')} ${counts.would_be_created === 1 ? 'was' : 'were'}`;
  return (
    `Nothing was imported: ${refused} refused. Because the import was all or nothing, the ${valid} not imported either. ` +
    'Fix the refused rows and import the file again, or tick “Import the valid rows even if some are refused”.'
  );
}

function outcome(result: ImportResult): Html {
  return result.written
    ? html`<div class="notice" role="status">${outcomeText(result)}</div>`
    : html`<div class="alert" role="alert">${outcomeText(result)}</div>`;
}

function resultsBody(result: ImportResult, session: SessionView, maxBytes: number): Html {
  const { counts } = result;
  return html`<h1>Import results</h1>
    ${outcome(result)}
    <dl class="counts">
      <dt>Rows in the file</dt>
      <dd>${formatNumber(counts.rows)}</dd>
      <dt>Created</dt>
      <dd>${formatNumber(counts.created)}</dd>
      ${
        counts.would_be_created
          ? html`<dt>Valid but not imported</dt>
              <dd>${formatNumber(counts.would_be_created)}</dd>`
          : ''
      }
      <dt>Refused</dt>
      <dd>${formatNumber(counts.refused)}</dd>
    </dl>
    <table>
      <caption class="visually-hidden">
        Every row of the file and what became of it
      </caption>
      <thead>
        <tr>
          <th scope="col">Row</th>
          <th scope="col">Result</th>
          <th scope="col">Name</th>
          <th scope="col">Email</th>
          <th scope="col">Why refused</th>
        </tr>
      </thead>
      <tbody>
        ${result.rows.map(resultRow)}
      </tbody>
    </table>
    <p><a href="/contacts">Go to contacts</a></p>
    <h2>Import another file</h2>
    ${importForm(session, maxBytes, { partial: result.partial })}`;
}

/**
 * Reads the multipart form: the CSRF token (which the form sends first) is checked before a byte
 * of the file is read. `bytes` is null when no file was chosen.
 */
async function readForm(request: FastifyRequest): Promise<{ bytes: Buffer | null; partial: boolean; tooLarge: boolean }> {
  const fields: Record<string, string> = {};
  let bytes: Buffer | null = null;
  let tooLarge = false;
  let checked = false;
  for await (const part of request.parts()) {
    if (part.type === 'field') {
      if (typeof part.value === 'string') fields[part.fieldname] = part.value;
      continue;
    }
    if (!checked) {
      checkCsrf(request, fields._csrf);
      checked = true;
    }
    if (part.fieldname !== 'file' || part.filename === '' || bytes !== null || tooLarge) {
      part.file.resume(); // no file chosen, or not ours: drain it
      continue;
    }
    const buffer = await part.toBuffer();
    if (part.file.truncated) tooLarge = true;
    else bytes = buffer;
  }
  if (!checked) checkCsrf(request, fields._csrf);
  return { bytes, partial: fields.partial === 'yes', tooLarge };
}

export const importPages: FastifyPluginAsync<DashboardDeps> = async (app, { db, maxImportBytes }) => {
  // A file over the limit is cut short and marked truncated (not thrown), so the form can say so.
  await app.register(multipart, {
    throwFileSizeLimit: false,
    limits: { fileSize: maxImportBytes, files: 1, fields: 10, fieldSize: 1024, parts: 12 },
  });

  const send = (request: FastifyRequest, reply: FastifyReply, status: number, title: string, body: Html) =>
    reply
      .code(status)
      .type('text/html; charset=utf-8')
      .send(page({ title, session: request.session!, section: 'import', body }));

  const formPage = (request: FastifyRequest, reply: FastifyReply, status: number, options: { error?: string; partial?: boolean } = {}) =>
    send(
      request,
      reply,
      status,
      'Import contacts',
      html`<h1>Import contacts</h1>
        ${options.error ? html`<div class="alert" role="alert">The file was not imported. See the message next to the file field.</div>` : ''}
        ${explanation()} ${importForm(request.session!, maxImportBytes, options)}`,
    );

  app.get('/import', async (request, reply) => formPage(request, reply, 200));

  app.post('/import', async (request, reply) => {
    if (!request.isMultipart()) return formPage(request, reply, 400, { error: 'Choose a CSV file to import.' });
    let form: Awaited<ReturnType<typeof readForm>>;
    try {
      form = await readForm(request);
    } catch (error) {
      if (error instanceof ServiceError) throw error; // a bad CSRF token: the 403 page
      if (answeredBeforeBody(request, reply, error, 'import form')) return undefined;
      // A malformed or cut-off multipart body, or more parts than the form has: a form error.
      request.log.info({ err: error }, 'unreadable import form');
      return formPage(request, reply, 400, { error: 'The upload could not be read. Choose one CSV file and try again.' });
    }
    const { bytes, partial, tooLarge } = form;
    if (tooLarge) {
      return formPage(request, reply, 413, {
        partial,
        error: `The file is larger than ${megabytes(maxImportBytes)}. Split it into smaller files.`,
      });
    }
    if (!bytes) return formPage(request, reply, 400, { partial, error: 'Choose a CSV file to import.' });
    try {
      const result = await importContacts(ctxOf(request, db), decodeCsv(bytes), { partial });
      return send(request, reply, result.written ? 200 : 400, 'Import results', resultsBody(result, request.session!, maxImportBytes));
    } catch (error) {
      const message = error instanceof ValidationError ? error.errors.find((e) => e.field === 'file')?.message : undefined;
      if (!message) throw error;
      return formPage(request, reply, 400, { partial, error: message });
    }
  });
};
