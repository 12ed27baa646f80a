import type { FastifyPluginAsync } from 'fastify';
import { createContact } from '../../../domain/contacts/contacts.js';
import { ctxOf, flash } from '../../context.js';
import { html } from '../../html.js';
import { page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { contactDetailPages } from './contactDetail.js';
import { contactBulkPages } from './contactBulk.js';
import { contactExportPages } from './contactExport.js';
import { allLabels, contactForm, formErrors, formInput, send } from './contactForm.js';
import { contactListPages } from './contactList.js';

export const contactPages: FastifyPluginAsync<DashboardDeps> = async (app, deps) => {
  const { db } = deps;
  await app.register(contactListPages, deps);
  await app.register(contactBulkPages, deps);
  app.get('/contacts/new', async (request, reply) => {
    const labels = await allLabels(ctxOf(request, db));
    return send(
      reply,
      200,
      page({
        title: 'New contact',
        session: request.session!,
        section: 'contacts',
        body: html`<h1>New contact</h1>
          ${contactForm({ session: request.session!, action: '/contacts', submit: 'Create contact', values: {}, labels, showLabels: true })}`,
      }),
    );
  });

  app.post('/contacts', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const input = formInput(request.body);
    try {
      const contact = await createContact(ctx, input, 'manual');
      flash(reply, `Created ${contact.first_name} ${contact.last_name}`.trim() + '.');
      return reply.redirect(`/contacts/${contact.id}`, 303);
    } catch (error) {
      const errors = formErrors(error);
      if (!errors) throw error;
      const labels = await allLabels(ctx);
      return send(
        reply,
        400,
        page({
          title: 'New contact',
          session: request.session!,
          section: 'contacts',
          body: html`<h1>New contact</h1>
            <div class="alert" role="alert">Please fix the fields marked below.</div>
            ${contactForm({ session: request.session!, action: '/contacts', submit: 'Create contact', values: input, labels, errors, showLabels: true })}`,
        }),
      );
    }
  });

  await app.register(contactExportPages, deps);
  await app.register(contactDetailPages, deps);
};
