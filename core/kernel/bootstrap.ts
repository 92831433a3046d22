import type { AppConfig } from '../../config/schema.ts';
import { generateToken, hashToken } from '../identity/api-tokens.ts';
import { createOrganizationIn, issueSession, PASSWORD_TOKEN_PREFIX } from '../identity/identity-admin.ts';
import type { Database } from '../ports/database.ts';
import type { IdentityStoresFactory } from '../ports/identity.ts';

export interface BootstrapResult {
  organizationId: string;
  projectId: string;
  personId: string;
  /** The owner's session token; it exists only in memory on the start that created it. */
  ownerToken: string;
  /**
   * A one-time set-password token for the owner (as `people reset-password` issues), in memory only:
   * the first start prints it in the console's link, so a fresh start leads to a signed-in console.
   */
  setPasswordToken: string;
}

// Arbitrary constant: serialises first-start bootstrap across replicas sharing one database.
const BOOTSTRAP_LOCK = 7_305_118_204;

/**
 * On the very first start, creates the organisation, its default project, an owner and an owner
 * session, under an advisory lock so two replicas starting together create one organisation.
 */
export async function bootstrapFirstOrganization(db: Database, storesFor: IdentityStoresFactory, config: AppConfig, now: Date): Promise<BootstrapResult | null> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [BOOTSTRAP_LOCK]);
    const stores = storesFor(tx);
    if ((await stores.organizations.count()) > 0) return null;
    const { bootstrap } = config;
    const { organization, project, owner } = await createOrganizationIn(stores, {
      name: bootstrap.organizationName,
      ownerEmail: bootstrap.ownerEmail,
      ownerName: bootstrap.ownerName,
    });
    const { token } = await issueSession(stores, { personId: owner.id, ttlDays: config.auth.sessionTtlDays, now, token: bootstrap.ownerToken });
    const setPasswordToken = generateToken(PASSWORD_TOKEN_PREFIX);
    const expiresAt = new Date(now.getTime() + config.auth.passwordTokenTtlHours * 3_600_000);
    await stores.passwordTokens.create({ personId: owner.id, tokenHash: hashToken(setPasswordToken), createdAt: now, expiresAt });
    return { organizationId: organization.id, projectId: project.id, personId: owner.id, ownerToken: token, setPasswordToken };
  });
}
