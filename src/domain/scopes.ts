import { ForbiddenError } from './errors.js';

export const SCOPES = ['contacts:read', 'contacts:write', 'groups:read', 'groups:write', 'files:read', 'files:write'] as const;

export type Scope = (typeof SCOPES)[number];

/** The read scopes: any one of them lets a key read events (of what it covers). */
export const READ_SCOPES: Scope[] = ['contacts:read', 'groups:read', 'files:read'];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** The scopes a grant really gives: a write scope includes the matching read scope. */
export function expandScopes(granted: Iterable<Scope>): Set<Scope> {
  const out = new Set<Scope>();
  for (const scope of granted) {
    out.add(scope);
    if (scope.endsWith(':write')) out.add(scope.replace(':write', ':read') as Scope);
  }
  return out;
}

/**
 * Who is acting: an API key (limited to its scopes), a signed-in dashboard user, or the system:
 * the operator's CLI, which acts on the organisation's data without being one of its members.
 */
export type Actor =
  | { kind: 'api_key'; keyId: string; scopes: ReadonlySet<Scope> }
  | { kind: 'user'; userId: string; role: 'admin' | 'member' }
  | { kind: 'system' };

export function hasScope(actor: Actor, scope: Scope): boolean {
  // Every member of an organisation may work with its data in the dashboard, and the operator too.
  return actor.kind !== 'api_key' || actor.scopes.has(scope);
}

/** The first line of every domain operation. */
export function requireScope(actor: Actor, scope: Scope): void {
  if (!hasScope(actor, scope)) {
    throw new ForbiddenError(`This API key lacks the ${scope} scope required for this operation.`);
  }
}
