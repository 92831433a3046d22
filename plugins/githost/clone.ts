import { lstat, mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { assertPublicUrl } from '../../core/net/outbound-url-guard.ts';
import { GitCommandError, NO_HOOKS, runGit } from './git-process.ts';

/**
 * Clones a repository from an http(s) URL a customer gave, with the system's git:
 * - the URL is checked by the kernel's outbound URL guard when the clone starts (scheme, literal
 *   addresses, and every address its host resolves to), and git follows no redirect, so it cannot
 *   be sent on to an address the guard would refuse;
 * - a credential goes to git as an `http.extraHeader` through GIT_CONFIG_* environment variables,
 *   never in the URL or the argv (which other users of the machine can read), and is scrubbed from
 *   anything git prints before it reaches an error;
 * - shallow (`--depth 1 --single-branch`, no tags, no submodules), http and https the only
 *   protocols git may use, no hooks, no prompt, no system or user git configuration;
 * - bounded: a timeout, and a size cap on the directory, checked while git writes, that kills the
 *   clone (and its process group) once passed; a failed clone leaves the directory empty.
 *
 * Known gap: git resolves the host again when it connects, so a name that answered a public address
 * to the guard and a private one to git a moment later (DNS rebinding) is not refused by the guard.
 * The outbound HTTP client closes that gap by checking the address it dials; git cannot be given
 * that check. Operators who need it closed run the service where private addresses are unreachable
 * from its network namespace (plugins/githost/README.md).
 */
export interface CloneRequest {
  url: string;
  /** The branch to take; the remote's default branch when absent. */
  branch?: string;
  /**
   * A full commit id to check out (detached) instead of the branch's head: fetched alone after the
   * clone when the head is another commit (the remote must allow fetching a commit by id, as GitHub does).
   */
  commit?: string;
  /** Sent as `Authorization: Bearer <token>`; or give `authorization` to send another scheme. */
  token?: string;
  /** A whole Authorization header value (`Basic …`), when the remote does not take Bearer tokens. */
  authorization?: string;
  into: string;
  maxBytes: number;
  timeoutMs: number;
  signal?: AbortSignal;
  /** outbound.allowPrivateNetwork, and a resolver for tests. */
  policy?: Parameters<typeof assertPublicUrl>[1];
}

export interface CloneResult {
  commit: string;
}

export type CloneRefusal = 'url_refused' | 'credentials_in_url' | 'bad_branch' | 'bad_commit';

export class CloneRefusedError extends Error {
  constructor(
    readonly reason: CloneRefusal,
    message: string,
  ) {
    super(message);
    this.name = 'CloneRefusedError';
  }
}

/** What every git run against a customer's URL is given: http(s) only, no redirect, no hooks, no credential helper. */
const REMOTE_SETTINGS = [
  ...NO_HOOKS,
  ...['-c', 'protocol.allow=never', '-c', 'protocol.https.allow=always', '-c', 'protocol.http.allow=always'],
  ...['-c', 'http.followRedirects=false', '-c', 'credential.helper=', '-c', 'core.askPass=/bin/false'],
];

const COMMIT_ID = /^[0-9a-f]{40}$/;
const BRANCH_NAME = /^(?!-)(?!.*\.\.)[A-Za-z0-9._/-]{1,200}$/;

export async function cloneRepository(request: CloneRequest): Promise<CloneResult> {
  if (carriesCredentials(request.url)) {
    throw new CloneRefusedError('credentials_in_url', 'A clone URL may not carry a user name or password; give the token apart from it');
  }
  let url: URL;
  try {
    url = await assertPublicUrl(request.url, request.policy ?? {});
  } catch (error) {
    throw new CloneRefusedError('url_refused', `Refusing to clone from ${originOf(request.url)}: ${(error as Error).message}`);
  }
  if (request.branch !== undefined && !BRANCH_NAME.test(request.branch)) throw new CloneRefusedError('bad_branch', 'Not a branch name');
  if (request.commit !== undefined && !COMMIT_ID.test(request.commit)) throw new CloneRefusedError('bad_commit', 'Not a full commit id');
  const secrets = [request.token, request.authorization].filter((value): value is string => typeof value === 'string' && value !== '');
  const redact = (text: string) => scrub(text, secrets);
  const header = request.authorization ?? (request.token ? `Bearer ${request.token}` : null);
  // Config through the environment (git ≥ 2.31): nothing of it in the argv.
  const env: Record<string, string> = {};
  if (header !== null) {
    env.GIT_CONFIG_COUNT = '1';
    env.GIT_CONFIG_KEY_0 = 'http.extraHeader';
    env.GIT_CONFIG_VALUE_0 = `Authorization: ${header}`;
  }
  const settings = REMOTE_SETTINGS;
  const branch = request.branch ? ['--branch', request.branch] : [];
  await mkdir(request.into, { recursive: true, mode: 0o700 });
  if ((await readdir(request.into)).length > 0) throw new Error(`clone target ${request.into} is not empty`);
  const common = {
    env,
    timeoutMs: request.timeoutMs,
    redact,
    ...(request.signal ? { signal: request.signal } : {}),
  };
  try {
    await runGit([...settings, 'clone', '--quiet', '--depth', '1', '--single-branch', '--no-tags', ...branch, '--', url.href, request.into], {
      ...common,
      what: `git clone from ${url.origin}`,
      overLimit: async () => (await directorySize(request.into)) > request.maxBytes,
    });
    const head = (await runGit(['-C', request.into, 'rev-parse', 'HEAD'], { ...common, what: 'git rev-parse' })).trim();
    if (request.commit === undefined || request.commit === head) return { commit: head };
    await runGit([...settings, '-C', request.into, 'fetch', '--quiet', '--depth', '1', '--no-tags', 'origin', request.commit], {
      ...common,
      what: `git fetch from ${url.origin}`,
      overLimit: async () => (await directorySize(request.into)) > request.maxBytes,
    });
    await runGit(['-C', request.into, '-c', 'advice.detachedHead=false', 'checkout', '--quiet', '--detach', request.commit], {
      ...common,
      what: 'git checkout',
    });
    return { commit: request.commit };
  } catch (error) {
    await emptyDirectory(request.into);
    if (error instanceof GitCommandError) {
      const message = error.reason === 'too_large' ? `git clone from ${url.origin} is larger than the ${request.maxBytes} byte limit` : error.message;
      throw new GitCommandError(error.reason, redact(message), error.detail);
    }
    throw error;
  }
}

export interface RemoteBranches {
  /** The branch the remote's HEAD names, or null when it names none. */
  defaultBranch: string | null;
  branches: Array<{ name: string; commit: string }>;
}

/**
 * The branches of a repository at an http(s) URL (`git ls-remote --symref`), under the same guard,
 * settings and timeout as a clone: what `GET /githost/reachable` and a URL app's branch list ask.
 * Nothing is written to disk; the answer is capped at 1 MiB of refs.
 */
export async function listRemoteBranches(request: Pick<CloneRequest, 'url' | 'timeoutMs' | 'policy' | 'signal'>): Promise<RemoteBranches> {
  if (carriesCredentials(request.url)) {
    throw new CloneRefusedError('credentials_in_url', 'A clone URL may not carry a user name or password; give the token apart from it');
  }
  let url: URL;
  try {
    url = await assertPublicUrl(request.url, request.policy ?? {});
  } catch (error) {
    throw new CloneRefusedError('url_refused', `Refusing to reach ${originOf(request.url)}: ${(error as Error).message}`);
  }
  const output = await runGit([...REMOTE_SETTINGS, 'ls-remote', '--symref', '--', url.href, 'HEAD', 'refs/heads/*'], {
    timeoutMs: request.timeoutMs,
    what: `git ls-remote of ${url.origin}`,
    redact: (text) => scrub(text, []),
    ...(request.signal ? { signal: request.signal } : {}),
  });
  let defaultBranch: string | null = null;
  const branches: RemoteBranches['branches'] = [];
  for (const line of output.split('\n')) {
    const symref = /^ref: refs\/heads\/(\S+)\s+HEAD$/.exec(line);
    if (symref) defaultBranch = symref[1]!;
    const head = /^([0-9a-f]{40,64})\s+refs\/heads\/(\S+)$/.exec(line);
    if (head) branches.push({ name: head[2]!, commit: head[1]! });
  }
  branches.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return { defaultBranch, branches };
}

function carriesCredentials(raw: string): boolean {
  try {
    const url = new URL(raw);
    return url.username !== '' || url.password !== '';
  } catch {
    return false;
  }
}

/** The scheme and host of a URL for a message: never its path or query, which may hold a token. */
function originOf(raw: string): string {
  try {
    return new URL(raw).origin;
  } catch {
    return 'an invalid URL';
  }
}

/** Every secret, and anything that looks like a URL's user information, replaced. */
function scrub(text: string, secrets: readonly string[]): string {
  let clean = text.replace(/\/\/[^/@\s]*@/g, '//[redacted]@');
  for (const secret of secrets) clean = clean.split(secret).join('[redacted]');
  return clean;
}

/** Bytes of the files under a directory (links not followed). */
export async function directorySize(dir: string): Promise<number> {
  let total = 0;
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) total += await directorySize(path);
    else total += (await lstat(path).catch(() => null))?.size ?? 0;
  }
  return total;
}

async function emptyDirectory(dir: string): Promise<void> {
  const entries = await readdir(dir).catch(() => []);
  await Promise.all(entries.map((entry) => rm(join(dir, entry), { recursive: true, force: true })));
}
