import { PagePromise } from '../pagination.js';
import type { Query, RequestOptions, Transport } from '../transport.js';
import type {
  Group,
  GroupCreateParams,
  GroupDeleted,
  GroupListParams,
  GroupMember,
  GroupMemberDeleted,
  GroupMemberListParams,
  GroupMembersAdded,
  GroupUpdateParams,
  Page,
} from '../types.js';
import { path } from './path.js';

/** A group's members. */
export class GroupMembers {
  constructor(private readonly transport: Transport) {}

  list(groupId: string, params: GroupMemberListParams = {}, options?: RequestOptions): PagePromise<GroupMember> {
    return new PagePromise(
      (cursor) =>
        this.transport.api<Page<GroupMember>>('GET', path`/groups/${groupId}/members`, { query: { ...params, cursor } as Query, options }),
      params.cursor,
    );
  }

  /** Adds 1 to 100 contacts (present ones are a no-op); an unknown contact adds none (404 with `missingIds`). */
  add(groupId: string, contactIds: string[], options?: RequestOptions): Promise<GroupMembersAdded> {
    return this.transport.api('POST', path`/groups/${groupId}/members`, { body: { contact_ids: contactIds }, options });
  }

  remove(groupId: string, contactId: string, options?: RequestOptions): Promise<GroupMemberDeleted> {
    return this.transport.api('DELETE', path`/groups/${groupId}/members/${contactId}`, { options });
  }
}

export class Groups {
  readonly members: GroupMembers;

  constructor(private readonly transport: Transport) {
    this.members = new GroupMembers(transport);
  }

  list(params: GroupListParams = {}, options?: RequestOptions): PagePromise<Group> {
    return new PagePromise(
      (cursor) => this.transport.api<Page<Group>>('GET', '/groups', { query: { ...params, cursor } as Query, options }),
      params.cursor,
    );
  }

  create(params: GroupCreateParams, options?: RequestOptions): Promise<Group> {
    return this.transport.api('POST', '/groups', { body: params, options });
  }

  get(id: string, options?: RequestOptions): Promise<Group> {
    return this.transport.api('GET', path`/groups/${id}`, { options });
  }

  update(id: string, params: GroupUpdateParams, options?: RequestOptions): Promise<Group> {
    return this.transport.api('PATCH', path`/groups/${id}`, { body: params, options });
  }

  delete(id: string, options?: RequestOptions): Promise<GroupDeleted> {
    return this.transport.api('DELETE', path`/groups/${id}`, { options });
  }
}
