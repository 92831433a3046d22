/** The scopes a credential can carry, exactly as the spec lists them. */
export const SCOPES = [
  'inference',
  'keys:read',
  'keys:write',
  'usage:read',
  'requests:read',
  'apps:read',
  'apps:deploy',
  'data:read',
  'projects:write',
  'webhooks:read',
  'webhooks:write',
  'mcp:read',
  'mcp:write',
] as const;

export type Scope = (typeof SCOPES)[number];

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/** Everything but `inference` is a management scope: granting one needs an owner or a holder. */
export function isManagementScope(scope: Scope): boolean {
  return scope !== 'inference';
}

export type OrgRole = 'owner' | 'admin' | 'member';
export const ORG_ROLES: readonly OrgRole[] = ['owner', 'admin', 'member'];

/**
 * What a person's session may do, by organisation role. Owners and admins hold every scope;
 * members cannot change projects or webhooks. Owner-only acts (spend caps, expiry, allow-list,
 * top-ups) are checked separately, on the role itself.
 */
export function scopesForRole(role: OrgRole): ReadonlySet<Scope> {
  if (role === 'owner' || role === 'admin') return new Set(SCOPES);
  return new Set(SCOPES.filter((s) => s !== 'projects:write' && s !== 'webhooks:write'));
}
