import type { Session } from './api/session.ts';

/**
 * What the signed-in person may do, decided in this one module so every page disables the same
 * controls for the same reason. It mirrors the API's rules (scopes by role, owner-only acts) only to
 * explain them early: the API refuses a forced call anyway, and its answer is what the page shows.
 */
export type Act =
  | 'keys.read'
  | 'keys.write'
  | 'keys.limits'
  | 'usage.read'
  | 'requests.read'
  | 'mcp.read'
  | 'mcp.write'
  | 'mcp.decide'
  | 'people.write'
  | 'people.owners'
  | 'webhooks.read'
  | 'webhooks.write';

export type Verdict = { readonly allowed: true; readonly reason: null } | { readonly allowed: false; readonly reason: string };

const ALLOWED: Verdict = { allowed: true, reason: null };

const SCOPE_OF: Record<Exclude<Act, 'keys.limits' | 'mcp.decide' | 'people.write' | 'people.owners'>, string> = {
  'keys.read': 'keys:read',
  'keys.write': 'keys:write',
  'usage.read': 'usage:read',
  'requests.read': 'requests:read',
  'mcp.read': 'mcp:read',
  'mcp.write': 'mcp:write',
  'webhooks.read': 'webhooks:read',
  'webhooks.write': 'webhooks:write',
};

export function may(caller: Session, act: Act): Verdict {
  if (act === 'keys.limits') {
    // The spec: a key's spend cap, expiry and rate limits are an owner's to set.
    if (caller.role !== 'owner') return { allowed: false, reason: 'Only an owner sets spend caps, expiry and rate limits' };
    return may(caller, 'keys.write');
  }
  if (act === 'mcp.decide') {
    // The spec: approving or denying a tool call is an owner's or admin's own decision, never a member's.
    // It asks for no scope: the role alone decides.
    if (caller.role === 'member') return { allowed: false, reason: 'Only an owner or admin approves or denies tool calls' };
    return ALLOWED;
  }
  if (act === 'people.write') {
    // plugins/people: inviting, changing roles, removing and the invitations list are owners' and
    // admins' acts (403 role_required); no scope covers people. Any member reads the people list.
    if (caller.role === 'member') return { allowed: false, reason: 'Only an owner or admin manages people and invitations' };
    return ALLOWED;
  }
  if (act === 'people.owners') {
    // plugins/people: the owner role is an owner's to give and to take, invitations to it included (403 owner_required).
    if (caller.role !== 'owner') return { allowed: false, reason: 'Only an owner gives, changes or takes away the owner role' };
    return ALLOWED;
  }
  const scope = SCOPE_OF[act];
  if (!caller.scopes.has(scope)) return { allowed: false, reason: `Your role (${caller.role}) does not hold ${scope}` };
  return ALLOWED;
}
