import { createOrganizationWithOwner, issueSession } from '../../core/identity/identity-admin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import type { TestApp } from '../helpers/app.ts';

/** A second organisation in the same deployment, with its owner's session: its rules must not touch the first's. */
export async function secondAccount(test: TestApp): Promise<{ organizationId: string; ownerToken: string }> {
  const container = test.app.svc.container;
  const suffix = Math.random().toString(36).slice(2);
  const { organization, owner } = await createOrganizationWithOwner(container.resolve(Tokens.Database), container.resolve(Tokens.IdentityFactory), {
    name: `Other ${suffix}`,
    ownerEmail: `other-${suffix}@example.com`,
    ownerName: 'Other owner',
  });
  const { token } = await issueSession(container.resolve(Tokens.Identity), { personId: owner.id, ttlDays: 1, now: new Date() });
  return { organizationId: organization.id, ownerToken: token };
}

/** Adds a rule as the given owner (the test app's own by default); throws unless it was created. */
export async function addRule(test: TestApp, body: Record<string, unknown>, token?: string): Promise<{ id: string; name: string }> {
  const response = await test.call('POST', '/client/guardrails/rules', { body, token });
  if (response.statusCode !== 201) throw new Error(`rule creation failed: ${response.statusCode} ${response.body}`);
  return response.json();
}
