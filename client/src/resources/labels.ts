import { PagePromise } from '../pagination.js';
import type { Query, RequestOptions, Transport } from '../transport.js';
import type { Label, LabelCreateParams, LabelDeleted, LabelListParams, LabelUpdateParams, Page } from '../types.js';
import { path } from './path.js';

/** The organisation's contact labels (`/contacts/labels`). */
export class Labels {
  constructor(private readonly transport: Transport) {}

  list(params: LabelListParams = {}, options?: RequestOptions): PagePromise<Label> {
    return new PagePromise(
      (cursor) => this.transport.api<Page<Label>>('GET', '/contacts/labels', { query: { ...params, cursor } as Query, options }),
      params.cursor,
    );
  }

  create(params: LabelCreateParams, options?: RequestOptions): Promise<Label> {
    return this.transport.api('POST', '/contacts/labels', { body: params, options });
  }

  get(id: string, options?: RequestOptions): Promise<Label> {
    return this.transport.api('GET', path`/contacts/labels/${id}`, { options });
  }

  update(id: string, params: LabelUpdateParams, options?: RequestOptions): Promise<Label> {
    return this.transport.api('PATCH', path`/contacts/labels/${id}`, { body: params, options });
  }

  /** Also detaches the label from every contact. */
  delete(id: string, options?: RequestOptions): Promise<LabelDeleted> {
    return this.transport.api('DELETE', path`/contacts/labels/${id}`, { options });
  }
}
