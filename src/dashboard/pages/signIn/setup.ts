import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { GoneError, ValidationError } from '../../../domain/errors.js';
import { completeSetup, setupLinkValid } from '../../../domain/orgs/setup.js';
import { flash, text } from '../../context.js';
import { finishSignIn } from '../../signIns.js';
import { checkFormToken, formToken } from '../../formGuard.js';
import { field, fieldErrors, html, type FieldErrors } from '../../html.js';
import { page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { formField, linkGone } from './linkGone.js';

/** The field names of the form, and the names createOrg gives its errors. */
const FIELD_OF_ERROR: Record<string, string> = { name: 'org_name', admin_email: 'email', admin_password: 'password' };

function setupPage(token: string, csrfToken: string, values: { orgName?: string; email?: string }, errors?: FieldErrors) {
  return page({
    title: 'Set up orgdata',
    session: null,
    body: html`<div class="login card">
      <h1>Set up orgdata</h1>
      <p>This installation has no organisation yet. Create the first one and its admin: you.</p>
      <form method="post" action="/setup/${token}" novalidate>
        ${formField(csrfToken)}
        ${field({ name: 'org_name', label: "Your organisation's name", value: values.orgName, errors, required: true, autocomplete: 'organization' })}
        ${field({ name: 'email', label: 'Your email', type: 'email', value: values.email, errors, required: true, autocomplete: 'username' })}
        ${field({
          name: 'password',
          label: 'Choose a password',
          type: 'password',
          errors,
          required: true,
          autocomplete: 'new-password',
          hint: 'At least 8 characters, not your email address.',
        })}
        <button type="submit">Create the organisation</button>
      </form>
      <p class="hint">This link works once. Invite the others from Settings → Members afterwards.</p>
    </div>`,
  });
}

/**
 * `GET/POST /setup/TOKEN`: the one-time link a server without organisations prints at start
 * (domain/orgs/setup.ts). Creating signs the admin in; the link then answers 410, like any
 * unknown, used or outdated link (an organisation made otherwise kills it too).
 */
export const setupPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db, secret, secureCookies } = deps;
  const show = (request: FastifyRequest, reply: FastifyReply, token: string, status: number, values = {}, errors?: FieldErrors) =>
    reply
      .code(status)
      .type('text/html; charset=utf-8')
      .header('referrer-policy', 'no-referrer')
      .send(setupPage(token, formToken(request, reply, secret, secureCookies), values, errors));

  app.get<{ Params: { token: string } }>('/setup/:token', async (request, reply) => {
    if (!(await setupLinkValid(db, secret, request.params.token))) return linkGone(reply, 'setup');
    return show(request, reply, request.params.token, 200);
  });

  app.post<{ Params: { token: string } }>('/setup/:token', async (request, reply) => {
    checkFormToken(request, secret, text(request.body, '_csrf'));
    const { token } = request.params;
    if (!(await setupLinkValid(db, secret, token))) return linkGone(reply, 'setup');
    const values = { orgName: text(request.body, 'org_name'), email: text(request.body, 'email') };
    let made;
    try {
      made = await completeSetup(db, secret, token, { ...values, password: text(request.body, 'password') });
    } catch (error) {
      if (error instanceof GoneError) return linkGone(reply, 'setup');
      if (error instanceof ValidationError) {
        const errors = fieldErrors(error.errors.map((e) => ({ ...e, field: FIELD_OF_ERROR[e.field] ?? e.field })));
        return show(request, reply, token, 400, values, errors);
      }
      throw error;
    }
    await finishSignIn(request, reply, deps, { userId: made.userId, email: made.email, orgId: made.orgId, method: 'setup' });
    flash(reply, `Your organisation is ready. You are signed in as ${made.email}, its admin.`);
    return reply.redirect('/contacts', 303);
  });
};
