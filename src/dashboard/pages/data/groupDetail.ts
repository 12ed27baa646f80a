import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { getContact } from '../../../domain/contacts/read.js';
import { listContacts } from '../../../domain/contacts/list.js';
import { searchWords } from '../../../domain/contacts/searchText.js';
import type { ContactView } from '../../../domain/contacts/view.js';
import { NotFoundError, ValidationError } from '../../../domain/errors.js';
import { getGroup, updateGroup, type GroupInput, type GroupView } from '../../../domain/groups/groups.js';
import { addMembers, listMembers, MAX_MEMBERS_PER_REQUEST, membersAmong, removeMember } from '../../../domain/groups/members.js';
import { decodeCursor, encodeCursor, type Position } from '../../../domain/pagination.js';
import type { Ctx } from '../../../domain/context.js';
import type { SessionView } from '../../../domain/sessions/sessions.js';
import { ctxOf, flash, list, takeFlash, text } from '../../context.js';
import { emptyState, field, fieldErrors, html, plural, type FieldErrors, type Html } from '../../html.js';
import { csrf, page } from '../../layout.js';
import type { DashboardDeps } from '../../dashboardDeps.js';
import { timelineSection } from './timeline.js';

const MEMBERS_PAGE_SIZE = 25;
const SEARCH_SIZE = 25;

export function send(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

export function formInput(body: unknown): GroupInput {
  const description = text(body, 'description');
  return { name: text(body, 'name'), description: description.trim() === '' ? null : description };
}

function fullName(contact: ContactView): string {
  return `${contact.first_name} ${contact.last_name}`.trim();
}

export function groupForm(session: SessionView, action: string, submit: string, values: Partial<GroupInput>, errors?: FieldErrors): Html {
  return html`<form method="post" action="${action}" novalidate>
    ${csrf(session)} ${field({ name: 'name', label: 'Name', value: values.name, errors, required: true })}
    ${field({ name: 'description', label: 'Description', value: values.description, errors, multiline: true })}
    <button type="submit">${submit}</button>
  </form>`;
}

/** How many pages of matches the picker reads, at most, looking for contacts not in the group yet. */
const SEARCH_READS = 4;

/**
 * The contacts a search finds that are not members yet, the first SEARCH_SIZE of them: pages of
 * matches are read (SEARCH_READS at most) and the members among each dropped, so the picker never
 * offers someone already in the group. `hasMore`: more matches may follow (narrow the search).
 */
async function nonMembers(ctx: Ctx, groupId: string, q: string): Promise<{ items: ContactView[]; hasMore: boolean; members: number }> {
  const words = searchWords(q);
  if (q.trim() !== '' && words.length === 0) return { items: [], hasMore: false, members: 0 };
  const items: ContactView[] = [];
  let members = 0;
  let after: Position | null = null;
  for (let read = 0; read < SEARCH_READS; read++) {
    const page = await listContacts(ctx, { limit: 100, after }, { words: words.length > 0 ? words : undefined });
    const inGroup = await membersAmong(
      ctx,
      groupId,
      page.items.map((c) => c.id),
    );
    for (const contact of page.items) {
      if (inGroup.has(contact.id)) members++;
      else if (items.length < SEARCH_SIZE) items.push(contact);
      else return { items, hasMore: true, members };
    }
    if (!page.hasMore || !page.last) return { items, hasMore: false, members };
    after = page.last;
  }
  return { items, hasMore: true, members };
}

/** What the group page shows besides the group: a failed edit or add, and the contact search. */
interface GroupState {
  values?: Partial<GroupInput>;
  errors?: FieldErrors;
  addError?: string;
  q?: string | null;
  cursor?: string;
}

/**
 * One group's page: its details, its members a page at a time, and adding contacts found by a
 * search. The list of groups, creating and deleting groups live in groups.ts, which registers this.
 */
export const groupDetailPages: FastifyPluginAsync<DashboardDeps> = async (app, { db, secret }) => {
  async function groupPage(request: FastifyRequest, reply: FastifyReply, group: GroupView, status: number, state: GroupState) {
    const ctx = ctxOf(request, db);
    const session = request.session!;
    const binding = JSON.stringify(['dashboard:group-members', ctx.orgId, group.id]);
    const after = state.cursor ? decodeCursor(secret, binding, state.cursor) : null;
    const q = state.q ?? null;
    const [members, found, timeline] = await Promise.all([
      listMembers(ctx, group.id, { limit: MEMBERS_PAGE_SIZE, after }),
      q === null ? null : nonMembers(ctx, group.id, q),
      timelineSection(ctx, group.id),
    ]);
    // One read per member row (at most 25); a member whose contact was just deleted shows its id.
    const contacts = await Promise.all(
      members.items.map((m) =>
        getContact(ctx, m.contact_id).catch((error: unknown) => {
          if (error instanceof NotFoundError) return null;
          throw error;
        }),
      ),
    );
    const last = members.items.at(-1);
    const next = members.hasMore && last ? encodeCursor(secret, binding, { createdAt: last.created_at, id: last.id }) : null;
    const here = (extra: Record<string, string>) => {
      const query = new URLSearchParams({ ...(q !== null ? { q } : {}), ...extra }).toString();
      return `/groups/${group.id}${query ? `?${query}` : ''}`;
    };
    const addError = state.addError;
    return send(
      reply,
      status,
      page({
        title: group.name,
        session,
        section: 'groups',
        notice: status === 200 ? takeFlash(request, reply) : null,
        body: html`<p><a href="/groups">← Groups</a></p>
          <h1>${group.name}</h1>
          <p class="muted">
            ${plural(group.member_count, 'member', 'members')} · created ${group.created_at.slice(0, 10)} · id <code>${group.id}</code>
          </p>
          ${state.errors || addError ? html`<div class="alert" role="alert">Please fix the fields marked below.</div>` : ''}
          <h2>Details</h2>
          ${groupForm(session, `/groups/${group.id}`, 'Save changes', state.values ?? group, state.errors)}
          <h2 id="members">Members</h2>
          ${
            members.items.length === 0
              ? state.cursor
                ? emptyState('No more members.', 'Go back to the first page.')
                : emptyState('No members yet.', 'Search for contacts under Add members below, then tick them and add them.')
              : html`<table>
                  <thead>
                    <tr>
                      <th scope="col">Name</th>
                      <th scope="col">Email</th>
                      <th scope="col">Added</th>
                      <th scope="col">Remove</th>
                    </tr>
                  </thead>
                  <tbody>
                    ${members.items.map((m, i) => {
                      const contact = contacts[i] ?? null;
                      const name = contact ? fullName(contact) : m.contact_id;
                      return html`<tr>
                        <td>${contact ? html`<a href="/contacts/${contact.id}">${name}</a>` : html`<code>${name}</code>`}</td>
                        <td>${contact?.email ?? ''}</td>
                        <td><time datetime="${m.added_at}">${m.added_at.slice(0, 10)}</time></td>
                        <td>
                          <form method="post" action="/groups/${group.id}/members/${m.contact_id}/remove" class="inline">
                            ${csrf(session)}<button type="submit" class="secondary">Remove ${name}</button>
                          </form>
                        </td>
                      </tr>`;
                    })}
                  </tbody>
                </table>`
          }
          <nav class="pager" aria-label="Member pages">
            ${state.cursor ? html`<a class="button secondary" href="${here({})}#members">First page</a>` : ''}${
              next ? html`<a class="button secondary" href="${here({ cursor: next })}#members">Next page</a>` : ''
            }
          </nav>
          <h2 id="add">Add members</h2>
          <form method="get" action="/groups/${group.id}#add" class="row" role="search">
            <div class="field">
              <label for="member-search">Search contacts</label
              ><input type="search" id="member-search" name="q" value="${q ?? ''}" placeholder="Name or email" />
            </div>
            <button type="submit" class="secondary">Search</button>
          </form>
          ${
            found === null
              ? html`<p class="hint">
                  Search by name or email, tick the contacts to add, then choose Add to group. Search with an empty box to list the first
                  ${SEARCH_SIZE} contacts.
                </p>`
              : found.items.length === 0
                ? html`<p class="muted">
                    ${
                      found.members > 0
                        ? html`Every contact matching${q ? html` “${q}”` : ''} is already in the group.`
                        : html`No contact matches${q ? html` “${q}”` : ''}.`
                    }
                  </p>`
                : html`<form method="post" action="/groups/${group.id}/members" novalidate>
                    ${csrf(session)}
                    <input type="hidden" name="q" value="${q ?? ''}" />
                    <fieldset class="checks${addError ? ' has-error' : ''}" ${addError ? html`aria-describedby="add-error"` : ''}>
                      <legend>Matching contacts</legend>
                      ${found.items.map(
                        (c) =>
                          html`<label
                            ><input type="checkbox" name="contact_ids" value="${c.id}" /> ${fullName(c)} &lt;${c.email}&gt;</label
                          >`,
                      )}
                    </fieldset>
                    ${addError ? html`<p class="error" id="add-error">${addError}</p>` : ''}
                    ${
                      found.hasMore
                        ? html`<p class="hint">
                            Showing the first ${SEARCH_SIZE} matches not in the group; narrow the search to see others.
                          </p>`
                        : ''
                    }
                    <p class="hint">Only contacts not in the group yet are listed.</p>
                    <button type="submit">Add to group</button>
                  </form>`
          }
          ${timeline}
          <h2>Delete</h2>
          <p>Deleting the group removes its memberships; the contacts stay.</p>
          <p><a class="button secondary" href="/groups/${group.id}/delete">Delete group</a></p>`,
      }),
    );
  }

  app.get<{ Params: { id: string } }>('/groups/:id', async (request, reply) => {
    const group = await getGroup(ctxOf(request, db), request.params.id);
    const q = typeof (request.query as Record<string, unknown>).q === 'string' ? text(request.query, 'q').slice(0, 200) : null;
    return groupPage(request, reply, group, 200, { q, cursor: text(request.query, 'cursor') || undefined });
  });

  app.post<{ Params: { id: string } }>('/groups/:id', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const input = formInput(request.body);
    try {
      await updateGroup(ctx, request.params.id, input);
      flash(reply, 'Saved.');
      return reply.redirect(`/groups/${request.params.id}`, 303);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      const group = await getGroup(ctx, request.params.id);
      return groupPage(request, reply, group, 400, { values: input, errors: fieldErrors(error.errors) });
    }
  });

  app.post<{ Params: { id: string } }>('/groups/:id/members', async (request, reply) => {
    const ctx = ctxOf(request, db);
    const contactIds = list(request.body, 'contact_ids');
    try {
      const group = await addMembers(ctx, request.params.id, contactIds);
      flash(
        reply,
        `Added ${plural(new Set(contactIds).size, 'contact', 'contacts')}; the group has ${plural(group.member_count, 'member', 'members')}.`,
      );
      // Back to the same search, so more contacts can be added from it.
      const q = text(request.body, 'q').slice(0, 200);
      return reply.redirect(`/groups/${group.id}?${new URLSearchParams({ q }).toString()}#members`, 303);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      const group = await getGroup(ctx, request.params.id);
      const addError = `Tick 1 to ${MAX_MEMBERS_PER_REQUEST} contacts to add.`;
      return groupPage(request, reply, group, 400, { q: text(request.body, 'q').slice(0, 200), addError });
    }
  });

  app.post<{ Params: { id: string; contactId: string } }>('/groups/:id/members/:contactId/remove', async (request, reply) => {
    await removeMember(ctxOf(request, db), request.params.id, request.params.contactId);
    flash(reply, 'Removed from the group; the contact stays.');
    return reply.redirect(`/groups/${request.params.id}#members`, 303);
  });
};
