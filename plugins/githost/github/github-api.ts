import { createHash, sign } from 'node:crypto';
import type { OutboundHttpClient, OutboundResponse } from '../../../core/net/outbound-http-client.ts';
import type { SecretVault } from '../../../core/services/secret-vault.ts';

/** The GitHub App the service is, as the operator registered it on GitHub (plugins.githost.github). */
export interface GitHubAppSettings {
  appId: string;
  /** The app's public page name: https://github.com/apps/<slug>. */
  appSlug: string;
  /** PEM of the app's RSA private key: signs the app's JWTs. */
  privateKey: string;
  clientId: string;
  clientSecret: string;
  webhookSecret: string;
  /** https://api.github.com, or a GitHub Enterprise Server's /api/v3. */
  apiBaseUrl: string;
  /** https://github.com: where people authorize the app and install it. */
  webBaseUrl: string;
}

/** GitHub answered with something other than what was asked (status and GitHub's own message, never a token). */
export class GitHubApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = 'GitHubApiError';
  }
}

export interface GitHubRepo {
  fullName: string;
  owner: string;
  cloneUrl: string;
  defaultBranch: string | null;
  empty: boolean;
}

export interface GitHubInstallation {
  id: number;
  accountLogin: string;
  accountType: string;
}

export const INSTALLATION_TOKEN_KIND = 'githost.installation';
export const USER_TOKEN_KIND = 'githost.user';
/** An installation token is reused until this close to its expiry (GitHub issues them for an hour). */
const TOKEN_MARGIN_MS = 5 * 60_000;
const PAGE = 100;
const MAX_PAGES = 50;

const API_VERSION = '2022-11-28';

function base64url(input: string | Buffer): string {
  return Buffer.from(input).toString('base64url');
}

/**
 * The service's calls to GitHub's REST API, all through the kernel's outbound HTTP client: the app's
 * JWT (RS256, signed with the app's key), installation tokens (kept in the secret vault until close to
 * their expiry, so every replica reuses one), people's OAuth tokens (in the vault), and the reads the
 * git host port needs. Errors carry GitHub's status and message only.
 */
export class GitHubApi {
  constructor(
    private readonly settings: GitHubAppSettings,
    private readonly http: OutboundHttpClient,
    private readonly vault: SecretVault,
    private readonly clock: () => Date,
  ) {}

  get app(): GitHubAppSettings {
    return this.settings;
  }

  /** The app's JWT: issued a minute in the past (clock drift), valid nine minutes (GitHub allows ten). */
  appJwt(): string {
    const now = Math.floor(this.clock().getTime() / 1000);
    const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT' }));
    const payload = base64url(JSON.stringify({ iat: now - 60, exp: now + 540, iss: this.settings.appId }));
    const signature = sign('RSA-SHA256', Buffer.from(`${header}.${payload}`), this.settings.privateKey);
    return `${header}.${payload}.${base64url(signature)}`;
  }

  /** An installation's access token, from the vault while it has more than five minutes left, else a new one. */
  async installationToken(installationId: number): Promise<string> {
    const owner = { kind: INSTALLATION_TOKEN_KIND, id: String(installationId) };
    const stored = await this.vault.get(owner, 'token');
    if (stored) {
      const { token, expiresAt } = JSON.parse(stored.value.reveal()) as { token: string; expiresAt: string };
      if (Date.parse(expiresAt) - this.clock().getTime() > TOKEN_MARGIN_MS) return token;
    }
    const answer = await this.call('POST', `/app/installations/${installationId}/access_tokens`, `Bearer ${this.appJwt()}`);
    const { token, expires_at } = answer as { token: string; expires_at: string };
    await this.vault.put(owner, 'token', JSON.stringify({ token, expiresAt: expires_at }));
    return token;
  }

  /** The installation's account, asked as the app. */
  async installation(installationId: number): Promise<GitHubInstallation> {
    const answer = (await this.call('GET', `/app/installations/${installationId}`, `Bearer ${this.appJwt()}`)) as InstallationJson;
    return installationOf(answer);
  }

  /** Every repository the installation may read. */
  async installationRepos(installationId: number): Promise<GitHubRepo[]> {
    const auth = `token ${await this.installationToken(installationId)}`;
    const repos: GitHubRepo[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const answer = (await this.call('GET', `/installation/repositories?per_page=${PAGE}&page=${page}`, auth)) as {
        repositories: RepoJson[];
      };
      for (const repo of answer.repositories) {
        repos.push({
          fullName: repo.full_name,
          owner: repo.owner.login,
          cloneUrl: repo.clone_url,
          defaultBranch: repo.default_branch ?? null,
          empty: repo.size === 0,
        });
      }
      if (answer.repositories.length < PAGE) break;
    }
    return repos;
  }

  /** A repository's branches; null when the installation cannot see the repository (GitHub's 404). */
  async branches(installationId: number, fullName: string): Promise<Array<{ name: string; commit: string }> | null> {
    const auth = `token ${await this.installationToken(installationId)}`;
    const branches: Array<{ name: string; commit: string }> = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      let answer: Array<{ name: string; commit: { sha: string } }>;
      try {
        answer = (await this.call('GET', `/repos/${fullName}/branches?per_page=${PAGE}&page=${page}`, auth)) as typeof answer;
      } catch (error) {
        if (error instanceof GitHubApiError && error.status === 404) return null;
        throw error;
      }
      for (const branch of answer) branches.push({ name: branch.name, commit: branch.commit.sha });
      if (answer.length < PAGE) break;
    }
    return branches.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The URL a person is sent to, to authorize the app to act as them. */
  authorizeUrl(state: string, redirectUri: string): string {
    const url = new URL('/login/oauth/authorize', this.settings.webBaseUrl);
    url.searchParams.set('client_id', this.settings.clientId);
    url.searchParams.set('redirect_uri', redirectUri);
    url.searchParams.set('state', state);
    return url.href;
  }

  /** The URL that installs the app on another GitHub account or organisation. */
  installUrl(state: string): string {
    const url = new URL(`/apps/${encodeURIComponent(this.settings.appSlug)}/installations/new`, this.settings.webBaseUrl);
    url.searchParams.set('state', state);
    return url.href;
  }

  /** Trades an OAuth code for the person's token; GitHub answers 200 with `error` for a bad code. */
  async exchangeCode(code: string, redirectUri: string): Promise<{ accessToken: string; refreshToken: string | null }> {
    const url = new URL('/login/oauth/access_token', this.settings.webBaseUrl);
    const body = new URLSearchParams({
      client_id: this.settings.clientId,
      client_secret: this.settings.clientSecret,
      code,
      redirect_uri: redirectUri,
    }).toString();
    const response = await this.http.request({
      url,
      method: 'POST',
      headers: { accept: 'application/json', 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    const answer = parseJson(response) as { access_token?: string; refresh_token?: string; error?: string; error_description?: string };
    if (response.status !== 200 || typeof answer.access_token !== 'string') {
      throw new GitHubApiError(response.status === 200 ? 400 : response.status, answer.error_description ?? answer.error ?? `GitHub answered ${response.status}`);
    }
    return { accessToken: answer.access_token, refreshToken: answer.refresh_token ?? null };
  }

  async user(accessToken: string): Promise<{ id: number; login: string }> {
    const answer = (await this.call('GET', '/user', `Bearer ${accessToken}`)) as { id: number; login: string };
    return { id: answer.id, login: answer.login };
  }

  /** The installations of this app the person may reach on GitHub. */
  async userInstallations(accessToken: string): Promise<GitHubInstallation[]> {
    const found: GitHubInstallation[] = [];
    for (let page = 1; page <= MAX_PAGES; page++) {
      const answer = (await this.call('GET', `/user/installations?per_page=${PAGE}&page=${page}`, `Bearer ${accessToken}`)) as {
        installations: InstallationJson[];
      };
      found.push(...answer.installations.map(installationOf));
      if (answer.installations.length < PAGE) break;
    }
    return found;
  }

  /** A person's token, kept in the vault under their organisation and person. */
  userTokenOwner(organizationId: string, personId: string): { kind: string; id: string } {
    return { kind: USER_TOKEN_KIND, id: `${organizationId}:${personId}` };
  }

  async userToken(organizationId: string, personId: string): Promise<string | null> {
    const stored = await this.vault.get(this.userTokenOwner(organizationId, personId), 'access_token');
    return stored ? stored.value.reveal() : null;
  }

  async storeUserToken(vault: SecretVault, organizationId: string, personId: string, token: { accessToken: string; refreshToken: string | null }): Promise<void> {
    const owner = this.userTokenOwner(organizationId, personId);
    await vault.put(owner, 'access_token', token.accessToken);
    if (token.refreshToken !== null) await vault.put(owner, 'refresh_token', token.refreshToken);
    else await vault.delete(owner, 'refresh_token');
  }

  private async call(method: string, path: string, authorization: string): Promise<unknown> {
    const response = await this.http.request({
      url: `${this.settings.apiBaseUrl.replace(/\/+$/, '')}${path}`,
      method,
      headers: {
        accept: 'application/vnd.github+json',
        authorization,
        'x-github-api-version': API_VERSION,
        'user-agent': `svc-githost/${this.settings.appId}`,
      },
    });
    if (response.status >= 300) {
      const message = (parseJson(response) as { message?: string } | null)?.message ?? '';
      throw new GitHubApiError(response.status, `GitHub answered ${response.status} to ${method} ${path.split('?')[0]}${message ? `: ${message}` : ''}`);
    }
    return parseJson(response);
  }
}

interface RepoJson {
  full_name: string;
  owner: { login: string };
  clone_url: string;
  default_branch?: string;
  size?: number;
}

interface InstallationJson {
  id: number;
  account: { login: string; type?: string } | null;
  target_type?: string;
}

function installationOf(json: InstallationJson): GitHubInstallation {
  return { id: json.id, accountLogin: json.account?.login ?? String(json.id), accountType: json.account?.type ?? json.target_type ?? 'User' };
}

function parseJson(response: OutboundResponse): unknown {
  try {
    return JSON.parse(response.body.toString('utf8'));
  } catch {
    return null;
  }
}

/** What an OAuth state is stored as: its hash, so the table never holds a usable state. */
export function stateHash(state: string): string {
  return createHash('sha256').update(state).digest('hex');
}
