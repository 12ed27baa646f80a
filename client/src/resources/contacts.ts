import { PagePromise } from '../pagination.js';
import type { Query, RequestOptions, Transport } from '../transport.js';
import type {
  Contact,
  ContactBatchItemResult,
  ContactBatchParams,
  ContactBatchResult,
  ContactCreateParams,
  ContactDeleted,
  ContactListParams,
  ContactUpdateParams,
  Event,
  Page,
} from '../types.js';
import { path } from './path.js';

/** The most contacts one POST /contacts/batch takes. */
export const BATCH_SIZE = 100;

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

/** What `contacts.sync` yields: a contact created or changed since, or one deleted since. */
export type ContactChange =
  { type: 'upserted'; contact: Contact; at: string } | { type: 'deleted'; id: string; contact: Contact; at: string };

export interface UpsertManyOptions extends RequestOptions {
  /** The field that finds the contact to update: `email` (default) or `external_id`. */
  matchOn?: 'email' | 'external_id';
  /** Items per request, 1 to 100 (default 100). */
  chunkSize?: number;
  /**
   * Each chunk's Idempotency-Key is `${idempotencyKey}-${chunk number}` (default: a new UUID per
   * call): give one to make a whole re-run of the same items safe too.
   */
  idempotencyKey?: string;
}

export interface SyncOptions extends RequestOptions {
  /**
   * Changes after this instant (the `checkpoint` of the previous sync); none: every contact, and
   * no deletions. Older than the server's EVENT_RETENTION_DAYS, deletions may be missing: sync
   * from scratch instead.
   */
  since?: string | Date;
  /** How far before `since` to start again (default 5,000 ms), for writes that committed late. */
  overlapMs?: number;
  /** Page size, 1 to 100 (default 100). */
  limit?: number;
}

/**
 * The contacts' query: `metadata: { key: value }` as `metadata[key]=value`, a Date as ISO 8601,
 * the rest as they are.
 */
function listQuery(params: ContactListParams, cursor: string | undefined): Query {
  const { metadata, updated_after: updatedAfter, ...rest } = params;
  const query: Query = { ...(rest as Query), cursor };
  if (updatedAfter !== undefined) query.updated_after = updatedAfter instanceof Date ? updatedAfter.toISOString() : updatedAfter;
  for (const [key, value] of Object.entries(metadata ?? {})) query[`metadata[${key}]`] = value;
  return query;
}

export class Contacts {
  readonly labels: ContactLabels;

  constructor(private readonly transport: Transport) {
    this.labels = new ContactLabels(transport);
  }

  /**
   * Await it for one page; `for await` it for every contact. Filters: `email`, `label_id`,
   * `external_id`, `metadata: { key: value }` (one pair), `updated_after`; order: `sort`.
   */
  list(params: ContactListParams = {}, options?: RequestOptions): PagePromise<Contact> {
    return new PagePromise(
      (cursor) => this.transport.api<Page<Contact>>('GET', '/contacts', { query: listQuery(params, cursor), options }),
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

  /** Partial: `null` clears phone, address, notes or external_id; `label_ids` replaces the set; `metadata` merges. */
  update(id: string, params: ContactUpdateParams, options?: RequestOptions): Promise<Contact> {
    return this.transport.api('PATCH', path`/contacts/${id}`, { body: params, options });
  }

  delete(id: string, options?: RequestOptions): Promise<ContactDeleted> {
    return this.transport.api('DELETE', path`/contacts/${id}`, { options });
  }

  /** One POST /contacts/batch (up to 100 items), answered item by item; retried with its Idempotency-Key. */
  batch(params: ContactBatchParams, options?: RequestOptions): Promise<ContactBatchResult> {
    return this.transport.api('POST', '/contacts/batch', { body: params, options });
  }

  /**
   * Upserts any number of contacts, `chunkSize` (100) a request, one request at a time (each
   * counts once for the rate limit; a 429 waits for Retry-After and retries, as every call does).
   * Returns every item's answer in input order, `index` counting from the first item given.
   * A failed item does not stop the others; a failed request (after its retries) throws.
   */
  async upsertMany(items: ContactCreateParams[], options: UpsertManyOptions = {}): Promise<ContactBatchItemResult[]> {
    const { matchOn = 'email', chunkSize = BATCH_SIZE, idempotencyKey = crypto.randomUUID(), ...request } = options;
    if (!Number.isInteger(chunkSize) || chunkSize < 1 || chunkSize > BATCH_SIZE) {
      throw new RangeError(`chunkSize must be an integer from 1 to ${BATCH_SIZE}`);
    }
    const results: ContactBatchItemResult[] = [];
    for (let start = 0, chunk = 0; start < items.length; start += chunkSize, chunk++) {
      const contacts = items.slice(start, start + chunkSize);
      const answer = await this.batch(
        { mode: 'upsert', match_on: matchOn, contacts },
        { ...request, idempotencyKey: `${idempotencyKey}-${chunk}` },
      );
      for (const item of answer.data) results.push({ ...item, index: item.index + start });
    }
    return results;
  }

  /**
   * Incremental sync: every contact created or changed after `since` (in `updated_at` order),
   * then every contact deleted after it (`contact.deleted` events). Apply them in the order
   * given; keep `sync.checkpoint` once done and pass it as `since` next time. A contact changed
   * during the walk may come twice: apply changes idempotently (by id).
   */
  sync(options: SyncOptions = {}): ContactSync {
    return new ContactSync(this.transport, options);
  }
}

/** An incremental sync in progress: iterate it with `for await`, then read `checkpoint`. */
export class ContactSync implements AsyncIterable<ContactChange> {
  #checkpoint: string | null;

  constructor(
    private readonly transport: Transport,
    private readonly options: SyncOptions,
  ) {
    this.#checkpoint = options.since === undefined ? null : new Date(options.since).toISOString();
  }

  /** The latest change seen (or `since` if none): pass it as `since` to the next sync. */
  get checkpoint(): string | null {
    return this.#checkpoint;
  }

  #seen(at: string): void {
    if (this.#checkpoint === null || at > this.#checkpoint) this.#checkpoint = at;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ContactChange, void, undefined> {
    const { since, overlapMs = 5000, limit = 100, ...request } = this.options;
    const from = since === undefined ? undefined : new Date(new Date(since).getTime() - overlapMs).toISOString();
    const contacts = new PagePromise<Contact>((cursor) =>
      this.transport.api<Page<Contact>>('GET', '/contacts', {
        query: listQuery({ limit, sort: 'updated_at', ...(from ? { updated_after: from } : {}) }, cursor),
        options: request,
      }),
    );
    for await (const contact of contacts) {
      this.#seen(contact.updated_at);
      yield { type: 'upserted', contact, at: contact.updated_at };
    }
    if (from === undefined) return; // a first sync has nothing to delete
    const deletions = new PagePromise<Event>((cursor) =>
      this.transport.api<Page<Event>>('GET', '/events', {
        query: { type: 'contact.deleted', created_after: from, limit, cursor },
        options: request,
      }),
    );
    for await (const event of deletions) {
      const contact = event.data.object as Contact;
      this.#seen(event.created_at);
      yield { type: 'deleted', id: contact.id, contact, at: event.created_at };
    }
  }
}
