import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { DomainEvents } from '../../../core/events/domain-events.ts';
import { html, sendPage } from '../../../core/http/pages.ts';
import { requestOrigin } from '../../../core/http/request-origin.ts';
import type { Database } from '../../../core/ports/database.ts';
import type { GitHostStore } from '../githost-store.ts';
import type { GitHubConnections } from './github-connections.ts';
import { CALLBACK_PATH } from './github-connections.ts';
import '../githost-events.ts';

export const WEBHOOK_PATH = '/githost/github/webhook';
/** GitHub caps webhook payloads at 25 MB. */
const MAX_WEBHOOK_BYTES = 25 * 1024 * 1024;
const ZERO_COMMIT = /^0{40}$/;

/** `X-Hub-Signature-256`: `sha256=` and the HMAC-SHA256 of the raw body under the webhook secret, compared in constant time. */
export function signatureMatches(secret: string, body: Buffer, header: unknown): boolean {
  if (typeof header !== 'string' || !header.startsWith('sha256=')) return false;
  const given = Buffer.from(header.slice('sha256='.length), 'hex');
  const expected = createHmac('sha256', secret).update(body).digest();
  return given.length === expected.length && timingSafeEqual(given, expected);
}

const pushPayload = z.object({
  ref: z.string(),
  before: z.string(),
  after: z.string(),
  repository: z.object({ full_name: z.string() }),
  installation: z.object({ id: z.number().int() }),
});

const installationPayload = z.object({ action: z.string(), installation: z.object({ id: z.number().int() }) });

const nullIfZero = (commit: string): string | null => (ZERO_COMMIT.test(commit) ? null : commit);

/**
 * GitHub's side of the provider: the OAuth callback the browser comes back to (public; found by its
 * one-time state) and the app's webhook (public; believed only with a valid X-Hub-Signature-256).
 */
export async function mountGitHubRoutes(
  app: FastifyInstance,
  deps: { connections: GitHubConnections; store: GitHostStore; database: Database; events: DomainEvents; webhookSecret: string; publicOrigin: string | null },
): Promise<void> {
  app.get(CALLBACK_PATH, { config: { auth: false, surface: 'client' } }, async (request, reply) => {
    const query = request.query as Record<string, unknown>;
    const text = (value: unknown) => (typeof value === 'string' && value.length > 0 && value.length <= 2000 ? value : null);
    const state = text(query.state);
    const installation = text(query.installation_id);
    const installationId = installation !== null && /^[1-9][0-9]{0,15}$/.test(installation) ? Number(installation) : null;
    const failed = (message: string) => sendPage(reply, { title: 'GitHub not connected', status: 400, body: html`<h1>GitHub not connected</h1><p role="alert">${message}</p>` });
    if (state === null) return failed('The link back from GitHub carries no state: start again from the console.');
    const redirectUri = new URL(CALLBACK_PATH, requestOrigin(request, deps.publicOrigin)).href;
    const outcome = await deps.connections.complete({ state, code: text(query.code), installationId, redirectUri });
    if (!outcome.ok) {
      return failed(outcome.reason === 'state' ? 'This sign-in expired or was used already: start again.' : 'GitHub did not accept the sign-in: start again.');
    }
    const claimed = outcome.claimed;
    const claimedText =
      claimed === null
        ? ''
        : claimed.ok
          ? ` The installation on ${claimed.installation.accountLogin} is this organisation’s to deploy from.`
          : claimed.reason === 'claimed'
            ? ' The installation is held by another organisation, which does not share it.'
            : ' Connect your GitHub account to link the installation.';
    const who = outcome.login === null ? 'GitHub' : `GitHub as ${outcome.login}`;
    return sendPage(reply, { title: 'GitHub connected', body: html`<h1>Connected</h1><p>Connected to ${who}.${claimedText} You may close this window.</p>` });
  });

  await app.register(async (scope) => {
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', { parseAs: 'buffer', bodyLimit: MAX_WEBHOOK_BYTES }, (_request, body, done) => done(null, body));
    scope.post(WEBHOOK_PATH, { config: { auth: false }, bodyLimit: MAX_WEBHOOK_BYTES }, async (request, reply) => {
      const body = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      if (!signatureMatches(deps.webhookSecret, body, request.headers['x-hub-signature-256'])) {
        return reply
          .code(401)
          .send({ error: { message: 'X-Hub-Signature-256 is missing or does not match the webhook secret', type: 'authentication_error', code: 'invalid_signature', param: null } });
      }
      const event = request.headers['x-github-event'];
      let json: unknown;
      try {
        json = JSON.parse(body.toString('utf8'));
      } catch {
        return reply.code(400).send({ error: { message: 'The body is not JSON', type: 'invalid_request_error', code: 'invalid_body', param: null } });
      }
      if (event === 'push') {
        const push = pushPayload.safeParse(json);
        if (!push.success || !push.data.ref.startsWith('refs/heads/')) return reply.code(202).send({ received: true, recorded: 0 });
        const { ref, before, after, repository, installation } = push.data;
        const organizations = await deps.store.organizationsOf(installation.id);
        const branch = ref.slice('refs/heads/'.length);
        await deps.database.transaction(async (tx) => {
          for (const organizationId of organizations) {
            await deps.events.emit(tx, {
              type: 'githost.pushed',
              organizationId,
              subject: repository.full_name,
              data: { provider: 'github', repo: repository.full_name, branch, before: nullIfZero(before), after: nullIfZero(after) },
              actor: null,
            });
          }
        });
        return reply.code(202).send({ received: true, recorded: organizations.length });
      }
      if (event === 'installation') {
        const change = installationPayload.safeParse(json);
        // Uninstalled on GitHub: no organisation deploys from it any more.
        if (change.success && change.data.action === 'deleted') await deps.store.forgetInstallation(change.data.installation.id);
      }
      return reply.code(202).send({ received: true, recorded: 0 });
    });
  });
}
