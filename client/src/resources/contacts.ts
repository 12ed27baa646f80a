import { PagePromise } from '../pagination.js';
import type { Query, RequestOptions, Transport } from '../transport.js';
import type { Contact, ContactCreateParams, ContactDeleted, ContactListParams, ContactUpdateParams, Page } from '../types.js';
import { path } from './path.js';

/** A contact's labels: attach (a no-op when attached) and detach; both answer the contact. */
export class ContactLabels {
  constructor(private readonly transport: Transport) {}

  attach(contactId: string, labelId: string, options?: RequestOptions): Promise<Contact> {
    return this.transport.api('PUT', path`/contacts/${contactId}/labels/${labelId}`, { options });
  }

  detach(contactId: string, labelId: string, options?: RequestOptions): Promise<Contact> {
    return this.transport.api('DELETE', path`/contacts/${contactId}/labels/${labelId}`, { options });
  }
}

export class Contacts {
  readonly labels: ContactLabels;

  constructor(private readonly transport: Transport) {
    this.labels = new ContactLabels(transport);
  }

  /** Await it for one page; `for await` it for every contact. Filters: `email`, `label_id`. */
  list(params: ContactListParams = {}, options?: RequestOptions): PagePromise<Contact> {
    return new PagePromise(
      (cursor) => this.transport.api<Page<Contact>>('GET', '/contacts', { query: { ...params, cursor } as Query, options }),
      params.cursor,
    );
  }

  /** Sends an Idempotency-Key (`options.idempotencyKey` or a new UUID), the same on every retry. */
  create(params: ContactCreateParams, options?: RequestOptions): Promise<Contact> {
    return this.transport.api('POST', '/contacts', { body: params, options });
  }

  get(id: string, options?: RequestOptions): Promise<Contact> {
    return this.transport.api('GET', path`/contacts/${id}`, { options });
  }

  /** Partial: `null` clears phone, address or notes; `label_ids` replaces the set. */
  update(id: string, params: ContactUpdateParams, options?: RequestOptions): Promise<Contact> {
    return this.transport.api('PATCH', path`/contacts/${id}`, { body: params, options });
  }

  delete(id: string, options?: RequestOptions): Promise<ContactDeleted> {
    return this.transport.api('DELETE', path`/contacts/${id}`, { options });
  }
}
