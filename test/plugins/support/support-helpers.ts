import type { LightMyRequestResponse } from 'fastify';
import { createOrganizationWithOwner, issueSession } from '../../../core/identity/identity-admin.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { type FormPart, formBody } from '../../helpers/multipart.ts';
import type { TestApp } from '../../helpers/app.ts';

/** Sends a multipart form to a management route as the given credential. */
export async function postForm(test: TestApp, url: string, parts: Record<string, FormPart>, token?: string): Promise<LightMyRequestResponse> {
  const { body, contentType } = await formBody(parts);
  return test.call('POST', url, { token, body, headers: { 'content-type': contentType } });
}

/** Another organisation on the same service, with its owner's session token. */
export async function otherOrganization(test: TestApp, name: string): Promise<{ organizationId: string; ownerToken: string; ownerId: string }> {
  const container = test.app.svc.container;
  const created = await createOrganizationWithOwner(container.resolve(Tokens.Database), container.resolve(Tokens.IdentityFactory), {
    name,
    ownerEmail: `owner-${name.toLowerCase().replace(/\W+/g, '-')}@example.com`,
    ownerName: `Owner of ${name}`,
  });
  const { token } = await issueSession(container.resolve(Tokens.Identity), { personId: created.owner.id, ttlDays: 1, now: new Date() });
  return { organizationId: created.organization.id, ownerToken: token, ownerId: created.owner.id };
}
