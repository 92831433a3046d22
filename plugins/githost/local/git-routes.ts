import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { PassThrough } from 'node:stream';
import { finished } from 'node:stream/promises';
import type { Authenticator } from '../../../core/identity/authenticator.ts';
import { scopeRefusal } from '../../../core/identity/authorization.ts';
import type { KeyCredential } from '../../../core/identity/credential.ts';
import { KEY_PREFIX } from '../../../core/identity/api-tokens.ts';
import { ApiError } from '../../../core/kernel/errors.ts';
import { CgiFailure, type CgiResponse, runHttpBackend } from './http-backend.ts';
import type { LocalRepositories } from './local-repos.ts';
import { isOrganizationId, isRepoName } from './local-repos.ts';
import type { PushRecorder } from './push-recorder.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import '../githost-errors.ts';

export const GIT_REALM = 'svc git';

export interface GitRouteDeps {
  repos: LocalRepositories;
  authenticator: Authenticator;
  pushes: PushRecorder;
  maxPushBytes: number;
  timeoutMs: number;
}

type Service = 'git-upload-pack' | 'git-receive-pack';

/**
 * Smart HTTP at `/git/<organisation id>/<name>.git/…`: the three requests of git's smart protocol
 * (`GET info/refs?service=…`, `POST git-upload-pack`, `POST git-receive-pack`), nothing of the dumb
 * one. Authentication is HTTP Basic whose password is an API key (`svc_live_…`; the user name is
 * ignored), checked by the kernel's authenticator like a Bearer key: fetching needs `apps:read`,
 * pushing `apps:deploy`. A key reaches its own organisation's repositories only; any other
 * repository, like one that does not exist, is 404.
 */
export async function mountGitRoutes(app: FastifyInstance, deps: GitRouteDeps): Promise<void> {
  await app.register(async (git) => {
    // Bodies are git's pack streams: handed to http-backend as they arrive, never parsed here.
    git.removeAllContentTypeParsers();
    git.addContentTypeParser('*', (_request, _payload, done) => done(null, undefined));
    const options = { config: { auth: false as const }, bodyLimit: deps.maxPushBytes };
    git.get('/git/:org/:repo/info/refs', options, (request, reply) => serve(deps, request, reply, 'info/refs'));
    git.post('/git/:org/:repo/git-upload-pack', options, (request, reply) => serve(deps, request, reply, 'git-upload-pack'));
    git.post('/git/:org/:repo/git-receive-pack', options, (request, reply) => serve(deps, request, reply, 'git-receive-pack'));
  });
}

async function serve(deps: GitRouteDeps, request: FastifyRequest, reply: FastifyReply, endpoint: 'info/refs' | Service): Promise<FastifyReply> {
  const { org, repo: segment } = request.params as { org: string; repo: string };
  const query = new URL(request.url, 'http://git.invalid').searchParams;
  const service: Service | null = endpoint === 'info/refs' ? serviceOf(query.get('service')) : endpoint;
  const name = segment.endsWith('.git') ? segment.slice(0, -'.git'.length) : '';
  // A path that cannot name a repository answers as one that does not exist, before anything else.
  if (service === null || !isOrganizationId(org) || !isRepoName(name)) throw notFound();
  const credential = await authenticate(deps.authenticator, request.headers.authorization);
  if (credential.organizationId !== org) throw notFound();
  const refusal = scopeRefusal(credential, service === 'git-receive-pack' ? 'apps:deploy' : 'apps:read');
  if (refusal) throw refusal;
  if (!(await deps.repos.exists(org, name))) throw notFound();

  const abort = new AbortController();
  // The client closing the connection before the answer is complete: git is killed with its group.
  let answered = false;
  reply.raw.once('finish', () => {
    answered = true;
  });
  reply.raw.once('close', () => {
    if (!answered) abort.abort();
  });
  const run = () =>
    runHttpBackend({
      projectRoot: deps.repos.organizationDir(org),
      pathInfo: `/${name}.git/${endpoint}`,
      method: request.method as 'GET' | 'POST',
      queryString: endpoint === 'info/refs' ? `service=${service}` : '',
      contentType: request.headers['content-type'],
      contentEncoding: request.headers['content-encoding'],
      body: request.method === 'POST' ? request.raw : null,
      remoteUser: credential.keyId,
      maxBodyBytes: deps.maxPushBytes,
      timeoutMs: deps.timeoutMs,
      signal: abort.signal,
    });

  if (endpoint !== 'git-receive-pack') return send(request, reply, await run().catch(translate));
  // A push: the branches before and after it tell what moved; one push at a time per repository, so
  // two concurrent pushes are never credited with each other's changes. The answer's last bytes are
  // held until the push's events are recorded, so a client whose push returned can rely on them.
  return deps.pushes.during(org, name, credential, async (recordPush) => {
    const response = await run().catch(translate);
    const held = new PassThrough();
    response.body.pipe(held, { end: false });
    // Whatever the outcome (a push cut short may still have moved a branch), once git has exited
    // and its last bytes are through, the branches are read again and the events recorded.
    void Promise.allSettled([finished(response.body), response.exited])
      .then(() => recordPush())
      .catch((error: unknown) => request.log.warn({ err: error, repo: name }, 'a push ended without its events recorded'))
      .finally(() => held.end());
    return send(request, reply, { ...response, body: held });
  });
}

/**
 * Streams git's answer. When git fails after its answer began (killed at the body cap, a timeout),
 * the answer cannot be completed and the request body may be unread: the connection is closed, which
 * the client reports as a failed push or fetch.
 */
function send(request: FastifyRequest, reply: FastifyReply, response: CgiResponse): FastifyReply {
  response.exited.catch(() => request.raw.socket?.destroy?.());
  reply.code(response.status);
  for (const [name, value] of Object.entries(response.headers)) reply.header(name, value);
  return reply.send(response.body);
}

function serviceOf(value: string | null): Service | null {
  return value === 'git-upload-pack' || value === 'git-receive-pack' ? value : null;
}

const challenge = { 'www-authenticate': `Basic realm="${GIT_REALM}", charset="UTF-8"` };
const notFound = () => new ApiError('git_repository_not_found');

/** HTTP Basic with an API key as the password, checked by the kernel's authenticator (as a Bearer key is). */
async function authenticate(authenticator: Authenticator, header: string | undefined): Promise<KeyCredential> {
  const password = basicPassword(header);
  if (password === null) {
    throw new ApiError('missing_api_key', 'Missing credential: git sends it as HTTP Basic, an API key (svc_live_…) as the password', { headers: challenge });
  }
  if (!password.startsWith(KEY_PREFIX)) {
    throw new ApiError('invalid_api_key', 'The password must be an API key (svc_live_…)', { headers: challenge });
  }
  try {
    const credential = await authenticator.authenticate(`Bearer ${password}`);
    if (credential.kind !== 'key') throw new ApiError('invalid_api_key', undefined, { headers: challenge });
    return credential;
  } catch (error) {
    // The same refusal a Bearer key gets (revoked, expired, unknown), with the challenge git needs to ask again.
    if (error instanceof ApiError && error.status === 401) throw new ApiError(error.catalogued, error.message, { headers: challenge });
    throw error;
  }
}

function basicPassword(header: string | undefined): string | null {
  const match = header === undefined ? null : /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (!match) return null;
  const decoded = Buffer.from(match[1] as string, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  const password = colon === -1 ? '' : decoded.slice(colon + 1);
  return password === '' ? null : password;
}

/**
 * A git run that failed before answering. Its request body may be unread (a push cut at the cap):
 * the connection is closed after the answer rather than kept for a next request it could not frame.
 */
function translate(error: unknown): never {
  const close = { connection: 'close' };
  if (error instanceof CgiFailure) {
    if (error.reason === 'too_large') throw new ApiError('request_too_large', error.message, { headers: close });
    if (error.reason === 'timeout') throw new ApiError('git_server_timeout', undefined, { headers: close });
    throw new Error(`git http-backend failed: ${error.message}`, { cause: error });
  }
  throw error;
}
