import type { FastifyInstance, FastifyReply, FastifyRequest, RouteShorthandOptions } from 'fastify';
import type { Authenticator } from '../../core/identity/authenticator.ts';
import type { SessionCredential } from '../../core/identity/credential.ts';
import type { PeopleSignIn } from '../../core/identity/people-sign-in.ts';
import { visibleProjects } from '../../core/identity/project-access.ts';
import type { Scope } from '../../core/identity/scopes.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { FORM_CSRF_FIELD, formCsrfPasses, formCsrfToken, type Html, html, sendPage } from '../../core/http/pages.ts';
import { sessionCookie, browserSessionOf } from '../../core/http/session-cookie.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import { formOf } from './form-body.ts';
import { AuthorizePageRefusal, type AuthorizeRequest, type OAuthServer } from './oauth-server.ts';
import { OAuthError } from './oauth-rules.ts';

export interface ConsentDeps {
  server: OAuthServer;
  authenticator: Authenticator;
  signIn: PeopleSignIn;
  identity: IdentityStores;
  host: RegExp;
  /** The pages' public origin, which their forms' Origin header must name. */
  authUrl: string;
  /** Cookies on auth_url are Secure when it is https. */
  secureCookies: boolean;
  sessionTtlDays: number;
}

/** The parameters of an authorization request, carried through the sign-in and consent forms. */
const AUTHORIZE_PARAMS = ['response_type', 'client_id', 'redirect_uri', 'state', 'code_challenge', 'code_challenge_method', 'scope', 'resource'] as const;

const SCOPE_WORDS: Record<Scope, string> = {
  inference: 'Call models',
  'keys:read': 'See API keys',
  'keys:write': 'Create and change API keys',
  'usage:read': 'See usage, spend and budgets',
  'requests:read': 'Read logged requests',
  'apps:read': 'See apps',
  'apps:deploy': 'Deploy and change apps',
  'data:read': 'Read data',
  'projects:write': 'Create and change projects',
  'webhooks:read': 'See webhooks',
  'webhooks:write': 'Create and change webhooks',
  'mcp:read': 'Use read tools over MCP',
  'mcp:write': 'Use write tools over MCP',
};

/**
 * The person-facing half of the authorization server: `GET /authorize` shows a sign-in form (the
 * kernel's people sign-in, into a session cookie of auth_url's host) or the consent page (which
 * application, which project, which scopes); `POST /authorize` approves or denies. Every form
 * carries the page helper's CSRF token, and the request is checked again on every step.
 */
export function mountConsentRoutes(scope: FastifyInstance, deps: ConsentDeps): void {
  const { server } = deps;
  const open: RouteShorthandOptions = { constraints: { host: deps.host }, config: { auth: false, surface: 'root' } };

  scope.get('/authorize', open, async (request, reply) => {
    const query = request.query as Record<string, string | undefined>;
    const checked = await checkRequest(server, reply, query);
    if (!checked) return reply;
    const session = await browserSessionOf(deps.authenticator, request);
    if (!session) return signInPage(reply, request, checked, deps.secureCookies);
    return consentPage(reply, request, checked, session, deps);
  });

  scope.post('/authorize/sign-in', open, async (request, reply) => {
    const form = formOf(request.body);
    if (!formCsrfPasses(request, form[FORM_CSRF_FIELD], deps.authUrl)) return refusedForm(reply);
    const checked = await checkRequest(server, reply, form);
    if (!checked) return reply;
    try {
      const signedIn = await deps.signIn.signIn({ email: (form['email'] ?? '').slice(0, 320), password: (form['password'] ?? '').slice(0, 4096), ip: request.ip });
      void reply.header('set-cookie', sessionCookie(signedIn.sessionToken, { secure: deps.secureCookies, maxAgeSeconds: deps.sessionTtlDays * 86_400 }));
      return reply.redirect(`/authorize?${authorizeQuery(form)}`, 303);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status >= 500) throw error;
      for (const [name, value] of Object.entries(error.headers)) void reply.header(name, value);
      return signInPage(reply, request, checked, deps.secureCookies, { status: error.status, message: error.message });
    }
  });

  scope.post('/authorize', open, async (request, reply) => {
    const form = formOf(request.body);
    if (!formCsrfPasses(request, form[FORM_CSRF_FIELD], deps.authUrl)) return refusedForm(reply);
    const checked = await checkRequest(server, reply, form);
    if (!checked) return reply;
    const session = await browserSessionOf(deps.authenticator, request);
    if (!session) return reply.redirect(`/authorize?${authorizeQuery(form)}`, 303);
    if (form['decision'] !== 'approve') {
      return reply.redirect(server.errorRedirect(checked.redirectUri, checked.state, new OAuthError('access_denied', 'The person denied access')), 303);
    }
    const project = (await visibleProjects(deps.identity, session)).find((p) => p.id === form['project_id']);
    if (!project) return consentPage(reply, request, checked, session, deps, 'Pick one of the projects listed');
    const scopes = grantable(checked.scopes, session);
    if (scopes.length === 0) return consentPage(reply, request, checked, session, deps, 'Your role holds none of the scopes this application asks for');
    const target = await server.approve(checked, { personId: session.personId, organizationId: session.organizationId, projectId: project.id, scopes });
    request.log.info({ personId: session.personId, clientId: checked.client.id, projectId: project.id }, 'connector authorized');
    return reply.redirect(target, 303);
  });
}

/** The request, or null when the answer (an error page, or a redirect to the client) is already sent. */
async function checkRequest(server: OAuthServer, reply: FastifyReply, params: Record<string, string | undefined>): Promise<AuthorizeRequest | null> {
  try {
    return await server.checkAuthorizeRequest(params);
  } catch (error) {
    if (error instanceof AuthorizePageRefusal) {
      sendPage(reply, { title: 'Cannot authorize', status: 400, body: html`<h1>This application cannot be authorized</h1><p>${error.description}</p>` });
      return null;
    }
    if (error instanceof OAuthError) {
      void reply.redirect(server.errorRedirect(params['redirect_uri']!, params['state'], error), 303);
      return null;
    }
    throw error;
  }
}

/** What the person may grant: the scopes asked for that their organisation role holds. */
function grantable(asked: readonly Scope[], session: SessionCredential): Scope[] {
  return asked.filter((scope) => session.scopes.has(scope));
}

function signInPage(reply: FastifyReply, request: FastifyRequest, checked: AuthorizeRequest, secure: boolean, problem?: { status: number; message: string }) {
  const csrf = formCsrfToken(request, reply, secure);
  return sendPage(reply, {
    title: 'Sign in',
    status: problem?.status ?? 200,
    body: html`<h1>Sign in to connect ${clientLabel(checked)}</h1>
${problem ? html`<p role="alert">${problem.message}</p>` : ''}
<form method="post" action="/authorize/sign-in">
${hiddenRequest(checked, csrf)}
<p><label>Email <input type="email" name="email" autocomplete="username" required></label></p>
<p><label>Password <input type="password" name="password" autocomplete="current-password" required></label></p>
<p><button type="submit">Sign in</button></p>
</form>`,
  });
}

async function consentPage(reply: FastifyReply, request: FastifyRequest, checked: AuthorizeRequest, session: SessionCredential, deps: ConsentDeps, problem?: string) {
  const csrf = formCsrfToken(request, reply, deps.secureCookies);
  const projects = await visibleProjects(deps.identity, session);
  const granted = new Set(grantable(checked.scopes, session));
  return sendPage(reply, {
    title: 'Authorize',
    status: problem ? 400 : 200,
    formTargets: [formTargetOf(checked.redirectUri)],
    body: html`<h1>Connect ${clientLabel(checked)}</h1>
<p>Signed in as ${session.email}. The application will act as you, in one project, with these permissions:</p>
${problem ? html`<p role="alert">${problem}</p>` : ''}
<ul>${checked.scopes.map((scope) => html`<li>${SCOPE_WORDS[scope]} (${scope})${granted.has(scope) ? '' : ' — not granted: your role does not hold it'}</li>`)}</ul>
<p>After approval you are sent back to ${new URL(checked.redirectUri).origin}.</p>
<form method="post" action="/authorize">
${hiddenRequest(checked, csrf)}
<p><label>Project <select name="project_id">${projects.map((p) => html`<option value="${p.id}">${p.name}</option>`)}</select></label></p>
<p><button type="submit" name="decision" value="approve">Approve</button> <button type="submit" name="decision" value="deny">Deny</button></p>
</form>`,
  });
}

function clientLabel(checked: AuthorizeRequest): string {
  return checked.client.clientName ?? new URL(checked.redirectUri).host;
}

function hiddenRequest(checked: AuthorizeRequest, csrf: string): Html {
  const values: Record<string, string | undefined> = {
    response_type: 'code',
    client_id: checked.client.id,
    redirect_uri: checked.redirectUri,
    state: checked.state,
    code_challenge: checked.codeChallenge,
    code_challenge_method: 'S256',
    scope: checked.scopes.join(' '),
    resource: checked.resource,
  };
  return html`<input type="hidden" name="${FORM_CSRF_FIELD}" value="${csrf}">${Object.entries(values).map(([name, value]) =>
    value === undefined ? '' : html`<input type="hidden" name="${name}" value="${value}">`,
  )}`;
}

function authorizeQuery(form: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const name of AUTHORIZE_PARAMS) if (form[name] !== undefined) query.set(name, form[name]);
  return query.toString();
}

function refusedForm(reply: FastifyReply) {
  return sendPage(reply, { title: 'Refused', status: 403, body: html`<h1>This form could not be accepted</h1><p>Go back to the application and start again.</p>` });
}

/**
 * The CSP source a redirect after the consent form lands on: the redirect URI's origin, or for a
 * native app's own scheme (`cursor://…`, whose URL has no origin) the scheme itself.
 */
export function formTargetOf(redirectUri: string): string {
  const url = new URL(redirectUri);
  return url.protocol === 'https:' || url.protocol === 'http:' ? url.origin : url.protocol;
}
