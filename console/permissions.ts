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
  | 'keys.move'
  | 'usage.read'
  | 'requests.read'
  | 'projects.write'
  | 'mcp.read'
  | 'mcp.write'
  | 'mcp.decide'
  | 'people.write'
  | 'webhooks.read'
  | 'webhooks.write'
  | 'batches.cancel'
  | 'connections.revokeOthers'
  | 'apps.read'
  | 'apps.deploy'
  | OwnerAct;

/** Acts the API reserves to an owner's own session (`ownerOnly`, or an owner check in the handler). */
type OwnerAct = 'credits.pay' | 'budget.cap' | 'projects.cap' | 'guardrails.write' | 'people.owners';

const OWNER_ONLY: Record<OwnerAct, { readonly reason: string; readonly alsoNeeds?: Act }> = {
  // credits.topup and credits.redeem: the credit is the organisation's money (ownerOnly).
  'credits.pay': { reason: 'Only an owner tops up credit or redeems a code' },
  // budget.update: the account-wide spend cap (ownerOnly).
  'budget.cap': { reason: 'Only an owner sets the account’s spend cap' },
  // projects.update answers owner_required to a spendCap from anyone else, and needs projects:write.
  'projects.cap': { reason: 'Only an owner sets a project’s spend cap', alsoNeeds: 'projects.write' },
  // guardrails.create, .update, .delete (ownerOnly); reading and trying the rules needs usage:read.
  'guardrails.write': { reason: 'Only an owner changes guardrail rules' },
  // plugins/people: the owner role is an owner's to give and to take, invitations to it included (403 owner_required).
  'people.owners': { reason: 'Only an owner gives, changes or takes away the owner role' },
};

export type Verdict = { readonly allowed: true; readonly reason: null } | { readonly allowed: false; readonly reason: string };

const ALLOWED: Verdict = { allowed: true, reason: null };

const SCOPE_OF: Record<Exclude<Act, 'keys.limits' | 'keys.move' | 'mcp.decide' | 'people.write' | 'connections.revokeOthers' | OwnerAct>, string> = {
  'keys.read': 'keys:read',
  'keys.write': 'keys:write',
  'usage.read': 'usage:read',
  'requests.read': 'requests:read',
  'projects.write': 'projects:write',
  'mcp.read': 'mcp:read',
  'mcp.write': 'mcp:write',
  'webhooks.read': 'webhooks:read',
  'webhooks.write': 'webhooks:write',
  // batches.cancel is /v1's cancel, so it takes what starting a batch takes.
  'batches.cancel': 'inference',
  'apps.read': 'apps:read',
  'apps.deploy': 'apps:deploy',
};

export function may(caller: Session, act: Act): Verdict {
  if (act === 'keys.limits') {
    // The spec: a key's spend cap, expiry and rate limits are an owner's to set.
    if (caller.role !== 'owner') return { allowed: false, reason: 'Only an owner sets spend caps, expiry and rate limits' };
    return may(caller, 'keys.write');
  }
  if (act === 'keys.move') {
    // The spec: moving a key to another project is a person's act (an API key never may), so in the
    // console it needs only what any change of a key needs. A member moves keys only between projects
    // where they are a developer or admin; the page cannot know those roles, so the API's 403 says it.
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
  if (act === 'connections.revokeOthers') {
    // oauth.connections.revoke: a member revokes the connectors they signed in themselves, never another person's.
    if (caller.role === 'member') return { allowed: false, reason: 'Only an owner or admin revokes another person’s connector' };
    return ALLOWED;
  }
  if (act in OWNER_ONLY) {
    const rule = OWNER_ONLY[act as OwnerAct];
    if (caller.role !== 'owner') return { allowed: false, reason: rule.reason };
    return rule.alsoNeeds ? may(caller, rule.alsoNeeds) : ALLOWED;
  }
  const scope = SCOPE_OF[act as keyof typeof SCOPE_OF];
  if (!caller.scopes.has(scope)) return { allowed: false, reason: `Your role (${caller.role}) does not hold ${scope}` };
  return ALLOWED;
}
