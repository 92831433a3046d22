import { execFileSync, spawn } from 'node:child_process';
import { createPublicKey, generateKeyPairSync, randomBytes, verify } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/**
 * GitHub on 127.0.0.1, speaking GitHub's wire shapes (REST v3 as documented at docs.github.com):
 * the app's endpoints (JWT-authenticated: `GET /app/installations/{id}`,
 * `POST /app/installations/{id}/access_tokens`), the installation's (`GET /installation/repositories`,
 * `GET /repos/{owner}/{repo}/branches`), a person's (`GET /user`, `GET /user/installations`), the OAuth
 * web flow's code exchange (`POST /login/oauth/access_token`), and git smart HTTP at
 * `/{owner}/{repo}.git` (git http-backend over bare repositories, Basic `x-access-token:<token>`).
 * API and web share one origin here; tests give it as both `apiBaseUrl` and `webBaseUrl`.
 */

export interface FakeRepo {
  fullName: string;
  /** A bare repository on disk served over git smart HTTP; its branches are read from it. */
  bareDir?: string;
  /** Branches of a repository without `bareDir`. */
  branches?: Record<string, string>;
  defaultBranch?: string;
}

export interface FakeGitHubRequest {
  method: string;
  path: string;
  authorization: string | undefined;
  body: string;
}

export interface FakeGitHub {
  url: string;
  appId: string;
  /** PEM of the app's private key: what the service signs its JWTs with. */
  privateKey: string;
  requests: FakeGitHubRequest[];
  /** Installs the app on an account, reading the repositories named. */
  install(installation: { id: number; account: string; type?: 'User' | 'Organization'; repos: FakeRepo[] }): void;
  /** A GitHub user who can reach these installations; answers a fresh OAuth code for them. */
  codeFor(user: { id: number; login: string; installations: number[] }): string;
  /** Installation tokens issued so far. */
  issuedTokens(): string[];
  /** From now on installation tokens expire this many ms after they are issued (default an hour). */
  tokenLifetimeMs: number;
  close(): Promise<void>;
}

interface Installation {
  id: number;
  account: { login: string; id: number; type: string };
  repos: FakeRepo[];
}

const notFound = { message: 'Not Found', documentation_url: 'https://docs.github.com/rest' };

export async function startFakeGitHub(options: { appId?: string } = {}): Promise<FakeGitHub> {
  const appId = options.appId ?? '123456';
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const privatePem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const publicKey = createPublicKey(privateKey);
  const installations = new Map<number, Installation>();
  const codes = new Map<string, { id: number; login: string; installations: number[] }>();
  const userTokens = new Map<string, { id: number; login: string; installations: number[] }>();
  const installationTokens = new Map<string, { installationId: number; expiresAt: number }>();
  const requests: FakeGitHubRequest[] = [];
  const sockets = new Set<Socket>();
  let origin = '';

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers }).end(JSON.stringify(body));
  };

  const jwtValid = (authorization: string | undefined): boolean => {
    const match = /^Bearer ([\w-]+)\.([\w-]+)\.([\w-]+)$/.exec(authorization ?? '');
    if (!match) return false;
    const [, header, payload, signature] = match as unknown as [string, string, string, string];
    if (!verify('RSA-SHA256', Buffer.from(`${header}.${payload}`), publicKey, Buffer.from(signature, 'base64url'))) return false;
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString()) as { iss: unknown; exp: number; iat: number };
    const now = Date.now() / 1000;
    return String(claims.iss) === appId && claims.exp > now && claims.exp - claims.iat <= 600;
  };

  const installationOfToken = (authorization: string | undefined): Installation | null => {
    const token = /^(?:token|Bearer) (\S+)$/.exec(authorization ?? '')?.[1];
    const issued = token ? installationTokens.get(token) : undefined;
    if (!issued || issued.expiresAt <= Date.now()) return null;
    return installations.get(issued.installationId) ?? null;
  };

  const branchesOf = (repo: FakeRepo): Record<string, string> => {
    if (!repo.bareDir) return repo.branches ?? {};
    const out = execFileSync('git', ['-C', repo.bareDir, 'for-each-ref', '--format=%(refname:short) %(objectname)', 'refs/heads/'], { encoding: 'utf8' });
    return Object.fromEntries(
      out
        .split('\n')
        .filter(Boolean)
        .map((line) => line.split(' ') as [string, string]),
    );
  };

  const repoJson = (repo: FakeRepo, installation: Installation) => {
    const [owner, name] = repo.fullName.split('/') as [string, string];
    const branches = branchesOf(repo);
    return {
      id: Math.abs([...repo.fullName].reduce((hash, c) => (hash * 31 + c.charCodeAt(0)) | 0, 7)),
      node_id: `R_${Buffer.from(repo.fullName).toString('base64url')}`,
      name,
      full_name: repo.fullName,
      private: true,
      owner: { login: owner, id: installation.account.id, type: installation.account.type },
      html_url: `${origin}/${repo.fullName}`,
      url: `${origin}/repos/${repo.fullName}`,
      clone_url: `${origin}/${repo.fullName}.git`,
      git_url: `git://127.0.0.1/${repo.fullName}.git`,
      ssh_url: `git@127.0.0.1:${repo.fullName}.git`,
      default_branch: repo.defaultBranch ?? 'main',
      size: Object.keys(branches).length === 0 ? 0 : 1,
      archived: false,
      disabled: false,
      visibility: 'private',
    };
  };

  const installationJson = (installation: Installation) => ({
    id: installation.id,
    account: { login: installation.account.login, id: installation.account.id, type: installation.account.type },
    repository_selection: 'selected',
    app_id: Number(appId),
    target_id: installation.account.id,
    target_type: installation.account.type,
    permissions: { contents: 'read', metadata: 'read' },
    events: ['push'],
    created_at: '2026-01-01T00:00:00Z',
    updated_at: '2026-01-01T00:00:00Z',
  });

  const page = <T>(items: T[], url: URL): T[] => {
    const perPage = Math.min(Number(url.searchParams.get('per_page') ?? 30), 100);
    const at = Math.max(Number(url.searchParams.get('page') ?? 1), 1);
    return items.slice((at - 1) * perPage, at * perPage);
  };

  /** git http-backend as a CGI program over the installation's bare repositories. */
  const serveGit = (req: IncomingMessage, res: ServerResponse, url: URL, body: Buffer) => {
    const match = /^\/([^/]+\/[^/]+)\.git(\/.*)$/.exec(url.pathname);
    const basic = /^Basic (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    const [user, token] = basic ? Buffer.from(basic, 'base64').toString().split(':') : [];
    const issued = token ? installationTokens.get(token) : undefined;
    const installation = issued && issued.expiresAt > Date.now() ? installations.get(issued.installationId) : undefined;
    const repo = match ? installation?.repos.find((r) => r.fullName === match[1]) : undefined;
    if (!match || user !== 'x-access-token' || !repo?.bareDir) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"' }).end();
      return;
    }
    const child = spawn('git', ['http-backend'], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: repo.bareDir,
        GIT_HTTP_EXPORT_ALL: '1',
        PATH_INFO: match[2],
        QUERY_STRING: url.search.slice(1),
        REQUEST_METHOD: req.method ?? 'GET',
        CONTENT_TYPE: req.headers['content-type'] ?? '',
        CONTENT_LENGTH: String(body.length),
        ...(req.headers['content-encoding'] ? { HTTP_CONTENT_ENCODING: String(req.headers['content-encoding']) } : {}),
        ...(req.headers['git-protocol'] ? { GIT_PROTOCOL: String(req.headers['git-protocol']) } : {}),
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: 'uploadpack.allowAnySHA1InWant',
        GIT_CONFIG_VALUE_0: 'true',
      },
    });
    child.stdin.end(body);
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.on('close', () => {
      const all = Buffer.concat(chunks);
      const split = all.indexOf('\r\n\r\n');
      const head = all.subarray(0, split).toString().split('\r\n');
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head) {
        const [name, ...rest] = line.split(':');
        const value = rest.join(':').trim();
        if (name?.toLowerCase() === 'status') status = Number.parseInt(value, 10);
        else if (name) headers[name] = value;
      }
      res.writeHead(status, headers).end(all.subarray(split + 4));
    });
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const url = new URL(req.url ?? '/', origin);
      const method = req.method ?? 'GET';
      const authorization = req.headers.authorization;
      requests.push({ method, path: url.pathname + url.search, authorization, body: body.toString() });
      const path = url.pathname;
      let m: RegExpExecArray | null;

      if (/\.git\//.test(path)) return serveGit(req, res, url, body);

      if (method === 'POST' && path === '/login/oauth/access_token') {
        const form = (req.headers['content-type'] ?? '').includes('json')
          ? (JSON.parse(body.toString()) as Record<string, string>)
          : Object.fromEntries(new URLSearchParams(body.toString()));
        const user = codes.get(form.code ?? '');
        if (!user || form.client_id !== 'Iv1.fakeclient' || form.client_secret !== 'fake-client-secret') {
          return json(res, 200, {
            error: 'bad_verification_code',
            error_description: 'The code passed is incorrect or expired.',
            error_uri: 'https://docs.github.com/apps/managing-oauth-apps/troubleshooting-oauth-app-access-token-request-errors/#bad-verification-code',
          });
        }
        codes.delete(form.code ?? '');
        const token = `ghu_${randomBytes(18).toString('base64url')}`;
        userTokens.set(token, user);
        return json(res, 200, { access_token: token, token_type: 'bearer', scope: '' });
      }

      if ((m = /^\/app\/installations\/(\d+)(\/access_tokens)?$/.exec(path))) {
        if (!jwtValid(authorization)) return json(res, 401, { message: 'A JSON web token could not be decoded', documentation_url: 'https://docs.github.com/rest' });
        const installation = installations.get(Number(m[1]));
        if (!installation) return json(res, 404, notFound);
        if (!m[2] && method === 'GET') return json(res, 200, installationJson(installation));
        if (m[2] && method === 'POST') {
          const token = `ghs_${randomBytes(18).toString('base64url')}`;
          const expiresAt = Date.now() + fake.tokenLifetimeMs;
          installationTokens.set(token, { installationId: installation.id, expiresAt });
          return json(res, 201, {
            token,
            expires_at: new Date(expiresAt).toISOString().replace(/\.\d{3}Z$/, 'Z'),
            permissions: { contents: 'read', metadata: 'read' },
            repository_selection: 'selected',
          });
        }
      }

      if (method === 'GET' && path === '/installation/repositories') {
        const installation = installationOfToken(authorization);
        if (!installation) return json(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
        const all = installation.repos.map((repo) => repoJson(repo, installation));
        return json(res, 200, { total_count: all.length, repository_selection: 'selected', repositories: page(all, url) });
      }

      if (method === 'GET' && (m = /^\/repos\/([^/]+\/[^/]+)\/branches$/.exec(path))) {
        const installation = installationOfToken(authorization);
        if (!installation) return json(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
        const repo = installation.repos.find((r) => r.fullName.toLowerCase() === m?.[1]?.toLowerCase());
        if (!repo) return json(res, 404, notFound);
        const branches = Object.entries(branchesOf(repo))
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([name, sha]) => ({ name, commit: { sha, url: `${origin}/repos/${repo.fullName}/commits/${sha}` }, protected: false }));
        return json(res, 200, page(branches, url));
      }

      const user = userTokens.get(/^(?:token|Bearer) (\S+)$/.exec(authorization ?? '')?.[1] ?? '');
      if (method === 'GET' && (path === '/user' || path === '/user/installations')) {
        if (!user) return json(res, 401, { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest' });
        if (path === '/user') return json(res, 200, { login: user.login, id: user.id, node_id: `U_${user.id}`, type: 'User', site_admin: false });
        const reachable = user.installations.flatMap((id) => {
          const installation = installations.get(id);
          return installation ? [installationJson(installation)] : [];
        });
        return json(res, 200, { total_count: reachable.length, installations: page(reachable, url) });
      }
      json(res, 404, notFound);
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const fake: FakeGitHub = {
    url: origin,
    appId,
    privateKey: privatePem,
    requests,
    tokenLifetimeMs: 3_600_000,
    install(installation) {
      installations.set(installation.id, {
        id: installation.id,
        account: { login: installation.account, id: installation.id * 10, type: installation.type ?? 'Organization' },
        repos: installation.repos,
      });
    },
    codeFor(user) {
      const code = randomBytes(10).toString('hex');
      codes.set(code, user);
      return code;
    },
    issuedTokens: () => [...installationTokens.keys()],
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  return fake;
}
