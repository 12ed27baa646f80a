import { PagePromise } from '../pagination.js';
import type { Query, RequestOptions, Transport } from '../transport.js';
import type { Event, EventListParams, Page } from '../types.js';
import { path } from './path.js';

/** The organisation's events, oldest first: what changed, whichever door it came through. */
export class Events {
  constructor(private readonly transport: Transport) {}

  /** Filters: `type` (exact, or a prefix such as `contact.*`), `created_after`, `created_before`. */
  list(params: EventListParams = {}, options?: RequestOptions): PagePromise<Event> {
    return new PagePromise(
      (cursor) => this.transport.api<Page<Event>>('GET', '/events', { query: { ...params, cursor } as Query, options }),
      params.cursor,
    );
  }

  get(id: string, options?: RequestOptions): Promise<Event> {
    return this.transport.api('GET', path`/events/${id}`, { options });
  }
}
