/** The events table: every change to an organisation's data (see schema.ts for the conventions). */

export interface EventsTable {
  id: string;
  org_id: string;
  type: string;
  /** contact, label, group or file: the read scope a key needs to see the event. */
  resource: string;
  /** JSON of the event's `data`: {object, previous_attributes?}. */
  data: string;
  created_at: string;
  /** Who caused it (migration 016): null on events recorded before. */
  actor_type: EventActorType | null;
  /** The key's or user's id; null for `system`. */
  actor_id: string | null;
  /** The request that caused it; null for system work and older events. */
  request_id: string | null;
  /** The id of `data.object` (a group_member's: its contact's): a contact's or group's timeline. */
  subject_id: string | null;
  /** group.member_* events: the group. */
  related_id: string | null;
}

export type EventActorType = 'api_key' | 'user' | 'system';
