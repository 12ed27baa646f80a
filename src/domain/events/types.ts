import type { Actor, Scope } from '../scopes.js';
import { hasScope } from '../scopes.js';

/** Every event type, in the order the reference lists them. */
export const EVENT_TYPES = [
  'contact.created',
  'contact.updated',
  'contact.deleted',
  'label.created',
  'label.updated',
  'label.deleted',
  'group.created',
  'group.updated',
  'group.deleted',
  'group.member_added',
  'group.member_removed',
  'file.uploaded',
  'file.deleted',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];
export type EventResource = 'contact' | 'label' | 'group' | 'file';

/** The read scope that shows each resource's events. */
export const READ_SCOPE: Record<EventResource, Scope> = {
  contact: 'contacts:read',
  label: 'contacts:read',
  group: 'groups:read',
  file: 'files:read',
};

export function resourceOf(type: EventType): EventResource {
  return type.slice(0, type.indexOf('.')) as EventResource;
}

/** The resources whose events an actor may read. */
export function readableResources(actor: Actor): EventResource[] {
  return (Object.keys(READ_SCOPE) as EventResource[]).filter((resource) => hasScope(actor, READ_SCOPE[resource]));
}

/**
 * A type filter or subscription pattern: an exact type, `*` (every type), or a prefix such as
 * `contact.*`. Returns null when the text is none of these.
 */
export function parsePattern(pattern: string): { exact: string } | { prefix: string } | null {
  if (pattern === '*') return { prefix: '' };
  const prefix = /^([a-z_]+)\.\*$/.exec(pattern);
  if (prefix && EVENT_TYPES.some((type) => type.startsWith(`${prefix[1]}.`))) return { prefix: `${prefix[1]}.` };
  if ((EVENT_TYPES as readonly string[]).includes(pattern)) return { exact: pattern };
  return null;
}

/** Whether an endpoint subscribed to `patterns` receives events of `type`. */
export function matchesAny(patterns: readonly string[], type: string): boolean {
  return patterns.some((pattern) => {
    const parsed = parsePattern(pattern);
    if (!parsed) return false;
    return 'exact' in parsed ? parsed.exact === type : type.startsWith(parsed.prefix);
  });
}
