import type { FastifyInstance, FastifyReply, FastifyRequest, RouteShorthandOptions } from 'fastify';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { PeopleSignIn, SignedIn } from '../../core/identity/people-sign-in.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { formBodyOf, installFormBodyParser } from '../../core/http/form-body.ts';
import { FORM_CSRF_FIELD, formCsrfPasses, formCsrfToken, type Html, html, sendPage } from '../../core/http/pages.ts';
import { cookieIsSecure, sessionCookie, browserSessionOf } from '../../core/http/session-cookie.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import type { InvitationStatus } from './invitation-store.ts';
import { ACCEPT_PATH, type Invitations, type LinkState } from './invitations.ts';
import { publicOriginOf } from '../../core/http/request-origin.ts';

/** Where a person lands once they have joined: a small page saying so (there is no console yet). */
export const WELCOME_PATH = '/invitations/welcome';

export interface AcceptPagesDeps {
  invitations: Invitations;
  signIn: PeopleSignIn;
  authenticator: Authenticator;
  identity: IdentityStores;
  /** `server.publicUrl`, whose origin the forms' Origin must name (else the request's own), and which decides Secure cookies. */
  publicUrl: string | undefined;
  sessionTtlDays: number;
}

type OpenLink = Extract<LinkState, { kind: 'open' }>;

const CLOSED: Record<Exclude<InvitationStatus, 'pending'>, { title: string; text: string }> = {
  accepted: { title: 'Invitation already accepted', text: 'This invitation was accepted already. Sign in with the account that accepted it.' },
  revoked: { title: 'Invitation revoked', text: 'This invitation was revoked. Ask whoever invited you for a new one.' },
  expired: { title: 'Invitation expired', text: 'This invitation has expired. Ask whoever invited you to send it again.' },
};

/**
 * The page an invitation's link opens (`GET /invitations/accept?token=svc_inv_…`), server-rendered
 * with the kernel's page helper (no script, a strict CSP, a CSRF token in every form):
 * - someone without an account (or one an operator added who never set a password) chooses a name
 *   and a password; the person, their membership and project roles are created then, and a
 *   browser session (the `svc_session` cookie) is opened;
 * - a person who has an account signs in with their password (the email is the invitation's);
 *   accepting adds the membership, and their password and sessions stay as they are.
 * Either way the browser lands on `/invitations/welcome`. A link that is spent, revoked, expired or
 * unknown says so, and nothing happens.
 */
export function mountAcceptPages(scope: FastifyInstance, deps: AcceptPagesDeps): void {
  const open: RouteShorthandOptions = { config: { auth: false, surface: 'root' } };
  const ownOrigin = publicOriginOf(deps.publicUrl);
  const secure = (request: FastifyRequest) => cookieIsSecure(request, deps.publicUrl);
  installFormBodyParser(scope);

  scope.get(ACCEPT_PATH, open, async (request, reply) => {
    const token = (request.query as Record<string, unknown>)['token'];
    const state = await deps.invitations.linkState(typeof token === 'string' ? token : '');
    if (state.kind !== 'open') return closedPage(reply, state);
    return acceptPage(reply, formCsrfToken(request, reply, secure(request)), token as string, state);
  });

  scope.post(ACCEPT_PATH, open, async (request, reply) => {
    const form = formBodyOf(request.body);
    if (!form || form.repeated !== null || !formCsrfPasses(request, form.fields[FORM_CSRF_FIELD], ownOrigin)) return refusedForm(reply);
    const token = form.fields['token'] ?? '';
    const state = await deps.invitations.linkState(token);
    if (state.kind !== 'open') return closedPage(reply, state);
    const password = (form.fields['password'] ?? '').slice(0, 4096);
    const again = (problem: { status: number; message: string }) => acceptPage(reply, formCsrfToken(request, reply, secure(request)), token, state, problem);
    try {
      let session: SignedIn;
      if (state.hasPassword) {
        // The account's own sign-in, throttled like any other; its password is only checked, never changed.
        session = await deps.signIn.signIn({ email: state.invitation.email, password, ip: request.ip });
        if (!(await deps.invitations.acceptAsSignedIn(token, session))) return reply.redirect(linkTo(token), 303);
      } else {
        const name = (form.fields['name'] ?? '').trim();
        if (name.length === 0 || name.length > 100) return again({ status: 400, message: 'Enter your name (at most 100 characters).' });
        // Hashed before the acceptance's transaction, never inside it (see PeopleSignIn.setPassword).
        const passwordHash = await deps.signIn.firstPasswordHash(password, state.invitation.email);
        const accepted = await deps.invitations.acceptAsNewPerson(token, { name, passwordHash });
        // The link was spent, or the email's account got a password, meanwhile: show what holds now.
        if (!accepted) return reply.redirect(linkTo(token), 303);
        session = accepted.session;
      }
      void reply.header('set-cookie', sessionCookie(session.sessionToken, { secure: secure(request), maxAgeSeconds: deps.sessionTtlDays * 86_400 }));
      request.log.info({ personId: session.person.id, invitationId: state.invitation.id }, 'invitation accepted');
      return reply.redirect(`${WELCOME_PATH}?organization=${state.invitation.organizationId}`, 303);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status >= 500) throw error;
      for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
      return again({ status: error.status, message: error.message });
    }
  });

  scope.get(WELCOME_PATH, open, async (request, reply) => {
    const organizationId = resourceId.safeParse((request.query as Record<string, unknown>)['organization']);
    const session = await browserSessionOf(deps.authenticator, request);
    const membership = session && organizationId.success ? await deps.identity.memberships.get(organizationId.data, session.personId) : null;
    if (!session || !membership) {
      return sendPage(reply, { title: 'Not signed in', status: 401, body: html`<h1>You are not signed in here</h1><p>Open your invitation link again, or sign in.</p>` });
    }
    const actsHere = session.organizationId === membership.organizationId;
    const current = actsHere ? null : await deps.identity.organizations.get(session.organizationId);
    return sendPage(reply, {
      title: `Welcome to ${membership.organizationName}`,
      body: html`<h1>Welcome to ${membership.organizationName}</h1>
<p>Signed in as ${session.email}. You are ${membership.role} of ${membership.organizationName}.</p>
${
  actsHere
    ? html`<p>Your session acts in ${membership.organizationName}: the management API is at <a href="/client/whoami">/client</a>.</p>`
    : html`<p>Your sessions act in ${current?.name ?? 'another organisation'}, as before. To act in ${membership.organizationName}, choose it with POST /client/organizations/default and the body {"organizationId": "${membership.organizationId}"}.</p>`
}`,
    });
  });
}

function linkTo(token: string): string {
  return `${ACCEPT_PATH}?token=${encodeURIComponent(token)}`;
}

function acceptPage(reply: FastifyReply, csrf: string, token: string, state: OpenLink, problem?: { status: number; message: string }) {
  const { invitation, organization } = state;
  const projects = invitation.projects.length;
  const granted = projects === 0 ? '' : ` with a role on ${projects} project${projects === 1 ? '' : 's'}`;
  const hidden: Html = html`<input type="hidden" name="${FORM_CSRF_FIELD}" value="${csrf}"><input type="hidden" name="token" value="${token}">`;
  const email = html`<p><label>Email <input type="email" name="email" value="${invitation.email}" readonly autocomplete="username"></label></p>`;
  return sendPage(reply, {
    title: `Join ${organization.name}`,
    status: problem?.status ?? 200,
    body: html`<h1>Join ${organization.name}</h1>
<p>You are invited to join ${organization.name} as ${invitation.role}${granted}.</p>
${problem ? html`<p role="alert">${problem.message}</p>` : ''}
${
  state.hasPassword
    ? html`<p>You already have an account: sign in to accept. Your password and your other sessions stay as they are.</p>
<form method="post" action="${ACCEPT_PATH}">
${hidden}${email}
<p><label>Password <input type="password" name="password" autocomplete="current-password" required></label></p>
<p><button type="submit">Sign in and join</button></p>
</form>`
    : html`<p>Choose your name and a password (at least 12 characters) to create your account.</p>
<form method="post" action="${ACCEPT_PATH}">
${hidden}${email}
<p><label>Name <input type="text" name="name" autocomplete="name" maxlength="100" required></label></p>
<p><label>Password <input type="password" name="password" autocomplete="new-password" minlength="12" required></label></p>
<p><button type="submit">Create account and join</button></p>
</form>`
}`,
  });
}

function closedPage(reply: FastifyReply, state: Exclude<LinkState, OpenLink>) {
  if (state.kind === 'unknown') {
    return sendPage(reply, {
      title: 'Invitation not found',
      status: 404,
      body: html`<h1>This invitation link is not valid</h1><p>Check that the whole link was opened, or ask for a new invitation.</p>`,
    });
  }
  const { title, text } = CLOSED[state.status];
  return sendPage(reply, { title, status: 410, body: html`<h1>${title}</h1><p>${text}</p>` });
}

function refusedForm(reply: FastifyReply) {
  return sendPage(reply, { title: 'Refused', status: 403, body: html`<h1>This form could not be accepted</h1><p>Open the invitation link again and start over.</p>` });
}
