import type { Credential } from '../../core/identity/credential.ts';
import type { SupportRequest } from './support-store.ts';

/** For operation descriptions. */
export const WHO_SEES =
  'A person sees the requests they opened; owners and admins see every request of the organisation. Whoever sees a request may add messages and mark it solved. API keys are refused (403 person_required): a request has a person to answer.';

/**
 * Whose requests a person sees: owners and admins every request of the organisation (the account's
 * support history is theirs to follow, like its billing), members their own only. Null: all of them.
 */
export function visibleRequester(credential: Credential): string | null {
  if (credential.kind === 'key') throw new Error('support operations are person-only');
  return credential.role === 'owner' || credential.role === 'admin' ? null : credential.personId;
}

/** Whether the person may see (and so reply to and solve) this request. */
export function maySee(credential: Credential, request: SupportRequest): boolean {
  const requester = visibleRequester(credential);
  return requester === null || request.requester.id === requester;
}
