import type { Queryable } from '../../core/ports/database.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { SqlApiKeyStore, SqlCredentialLookup, SqlSessionStore } from './api-key-store.ts';
import { SqlMembershipStore, SqlOrganizationStore, SqlPasswordTokenStore, SqlPersonStore } from './organization-store.ts';
import { SqlProjectMemberStore, SqlProjectStore } from './project-store.ts';

/** Every identity store over one connection or transaction. */
export function sqlIdentityStores(db: Queryable): IdentityStores {
  return {
    organizations: new SqlOrganizationStore(db),
    people: new SqlPersonStore(db),
    memberships: new SqlMembershipStore(db),
    projects: new SqlProjectStore(db),
    projectMembers: new SqlProjectMemberStore(db),
    sessions: new SqlSessionStore(db),
    passwordTokens: new SqlPasswordTokenStore(db),
    apiKeys: new SqlApiKeyStore(db),
    credentials: new SqlCredentialLookup(db),
  };
}
