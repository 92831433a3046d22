import type { Database } from '../ports/database.ts';
import { secretPlaceholder } from '../services/mail-messages.ts';
import type { Mailer } from '../ports/mail.ts';
import type { IdentityStores, IdentityStoresFactory, Organization, Person, Project } from '../ports/identity.ts';
import type { OrgRole } from './scopes.ts';
import { generateToken, hashToken, SESSION_PREFIX } from './api-tokens.ts';

/**
 * The operator's acts on identity, shared by first-start bootstrap, the CLI and tests: create an
 * organisation with its default project and owner, add people, issue session tokens.
 */
export async function createOrganizationWithOwner(
  db: Database,
  storesFor: IdentityStoresFactory,
  input: { name: string; ownerEmail: string; ownerName: string },
): Promise<{ organization: Organization; project: Project; owner: Person }> {
  return db.transaction((tx) => createOrganizationIn(storesFor(tx), input));
}

/** The same, with stores already bound to an open transaction. */
export async function createOrganizationIn(
  stores: IdentityStores,
  input: { name: string; ownerEmail: string; ownerName: string },
): Promise<{ organization: Organization; project: Project; owner: Person }> {
  const organization = await stores.organizations.create({ name: input.name });
  const project = await stores.projects.create({ organizationId: organization.id, name: 'Default project', isDefault: true });
  const owner = await addPersonTo(stores, { organizationId: organization.id, email: input.ownerEmail, name: input.ownerName, role: 'owner' });
  return { organization, project, owner };
}

/** Adds a person (created if their email is new) to an organisation with a role. */
export async function addPersonTo(stores: IdentityStores, input: { organizationId: string; email: string; name: string; role: OrgRole }): Promise<Person> {
  const person = (await stores.people.getByEmail(input.email)) ?? (await stores.people.create({ email: input.email, name: input.name }));
  const existing = await stores.memberships.get(input.organizationId, person.id);
  if (existing) await stores.memberships.update(input.organizationId, person.id, { role: input.role, status: 'active' });
  else await stores.memberships.add({ organizationId: input.organizationId, personId: person.id, role: input.role });
  if (!person.defaultOrganizationId) {
    await stores.people.setDefaultOrganization(person.id, input.organizationId);
    return { ...person, defaultOrganizationId: input.organizationId };
  }
  return person;
}

/** Issues a session token for a person; the token is returned once and stored hashed. */
export async function issueSession(
  stores: IdentityStores,
  input: { personId: string; ttlDays: number; now: Date; token?: string; csrfTokenHash?: string },
): Promise<{ token: string; expiresAt: Date; sessionId: string }> {
  const token = input.token ?? generateToken(SESSION_PREFIX);
  const expiresAt = new Date(input.now.getTime() + input.ttlDays * 86_400_000);
  const session = await stores.sessions.create({ personId: input.personId, tokenHash: hashToken(token), expiresAt, csrfTokenHash: input.csrfTokenHash ?? null });
  return { token, expiresAt, sessionId: session.id };
}

export const PASSWORD_TOKEN_PREFIX = 'svc_pwd_';

/**
 * Mails a person a one-time token that sets their password (POST /client/auth/set-password): the
 * operator's password reset (`npm run cli -- people reset-password`). Setting it ends the person's
 * earlier sessions. The token is stored hashed and returned once, for the CLI to show when mail
 * does not go out. Joining an organisation is an invitation's business (plugins/people).
 */
export async function mailSetPasswordToken(
  db: Database,
  storesFor: IdentityStoresFactory,
  mailer: Mailer,
  input: { email: string; baseUrl: string; ttlHours: number; now: Date },
): Promise<{ person: Person; token: string; expiresAt: Date }> {
  const token = generateToken(PASSWORD_TOKEN_PREFIX);
  const expiresAt = new Date(input.now.getTime() + input.ttlHours * 3_600_000);
  const stores = storesFor(db);
  const person = await stores.people.getByEmail(input.email);
  if (!person) throw new Error(`no person with email ${input.email}`);
  await stores.passwordTokens.create({ personId: person.id, tokenHash: hashToken(token), createdAt: input.now, expiresAt });
  const endpoint = `${input.baseUrl.replace(/\/+$/, '')}/client/auth/set-password`;
  await mailer.send({
    to: person.email,
    subject: 'Set your password',
    text: [
      'A new password was asked for your account.',
      '',
      `Set it (at least 12 characters) by sending POST ${endpoint}`,
      `with the JSON body {"token": "${secretPlaceholder('token')}", "password": "…"}.`,
      'Setting it signs you out everywhere.',
      '',
      `The token works once and until ${expiresAt.toISOString()}. If you did not ask for it, ignore this message.`,
    ].join('\n'),
    // Put in place only on delivery: the outbox keeps it apart from the body until first read.
    secrets: { token },
  });
  return { person, token, expiresAt };
}
