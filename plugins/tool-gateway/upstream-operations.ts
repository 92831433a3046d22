import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import { authorizedProject, authorizedRecord, type RecordKind } from '../../core/identity/authorization.ts';
import { visibleProjectIds } from '../../core/identity/project-access.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { OutboundHttpError, type OutboundHttpClient } from '../../core/net/outbound-http-client.ts';
import { actorOf } from '../../core/operations/operation-events.ts';
import { type AnyOperation, defineOperation } from '../../core/operations/operations.ts';
import type { Database } from '../../core/ports/database.ts';
import type { IdentityStores } from '../../core/ports/identity.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import { listResponse, pageQuery } from '../../core/vocabulary/pagination.ts';
import type { ToolGatewayConfig } from './tool-gateway-config.ts';
import { DEMO_URL } from './demo-tools.ts';
import { createUpstreamRequest, refreshView, SLUG_MAX, updateUpstreamRequest, upstreamListView, upstreamRemovalView, upstreamTestView, upstreamView } from './tool-gateway-schemas.ts';
import { discover, originOf, type RefreshDeps, refreshUpstream } from './tool-refresh.ts';
import type { ToolStore } from './tool-store.ts';
import type { OAuthAppStore } from './oauth-app-store.ts';
import type { UpstreamOAuth } from './upstream-oauth.ts';
import { forgetHeaderValue, forgetHeaderValuesOf, storeHeaderValue } from './upstream-secrets.ts';
import type { Upstream, UpstreamAuth, UpstreamSettings, UpstreamStore, UpstreamTransport } from './upstream-store.ts';
// Catalogues the codes and event types this module answers with and emits.
import './tool-gateway-errors.ts';
import './tool-gateway-events.ts';

export interface UpstreamOperationDeps {
  database: Database;
  upstreams: UpstreamStore;
  tools: ToolStore;
  identity: IdentityStores;
  vault: SecretVault;
  oauth: UpstreamOAuth;
  apps: OAuthAppStore;
  http: OutboundHttpClient;
  events: DomainEvents;
  clock: () => Date;
  config: ToolGatewayConfig;
  /** Plain http is accepted only where customer URLs may reach private networks (`outbound.allowPrivateNetwork`). */
  allowHttp: boolean;
}

export const MCP_PAGE_DEFAULT = 50;
export const MCP_PAGE_MAX = 200;
const DEFAULT_TIMEOUT_MS = 30_000;

/**
 * Headers the gateway sets itself, or that would change how the request is framed or routed: a
 * customer's credential goes in another header.
 */
const RESERVED_HEADERS = new Set([
  'host',
  'content-length',
  'content-type',
  'transfer-encoding',
  'connection',
  'keep-alive',
  'upgrade',
  'te',
  'trailer',
  'accept',
  'accept-encoding',
  'expect',
  'cookie',
  'mcp-session-id',
  'mcp-protocol-version',
  'last-event-id',
]);

/**
 * A URL a customer gives (an upstream's, an authorization server's), checked by the kernel's guard
 * now: https (http only where private networks are allowed), no user name or password, not a
 * private address. A name that does not resolve yet is accepted: calls to it fail `connect` until it does.
 */
export async function checkedCustomerUrl(
  http: OutboundHttpClient,
  allowHttp: boolean,
  raw: string,
  codes: { invalid: 'upstream_url_invalid' | 'oauth_url_invalid'; refused: 'upstream_url_refused' | 'oauth_url_refused'; param: string; what: string },
): Promise<string> {
  const invalid = (message: string) => new ApiError(codes.invalid, message, { param: codes.param });
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw invalid(`${codes.what} is not a valid absolute URL`);
  }
  if (parsed.username || parsed.password) throw invalid(`${codes.what} may not carry a user name or password; use the header authentication instead`);
  if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && allowHttp)) throw invalid(`${codes.what} must use https, not ${parsed.protocol.replace(/:$/, '')}`);
  try {
    await http.check(parsed);
  } catch (error) {
    if (!(error instanceof OutboundHttpError)) throw error;
    if (error.kind === 'refused_address' && error.reason === 'private_address') throw new ApiError(codes.refused, error.message, { param: codes.param });
    if (error.kind === 'refused_address') throw invalid(error.message);
  }
  return parsed.href;
}

/** MCP upstreams as a resource kind: reached through their project. */
export function upstreamRecordKind(upstreams: UpstreamStore): RecordKind<Upstream> {
  return {
    name: 'mcp upstream',
    notFound: 'upstream_not_found',
    async find(organizationId, id) {
      const upstream = await upstreams.get(organizationId, id);
      return upstream ? { record: upstream, projectId: upstream.projectId } : null;
    },
  };
}

export function toUpstreamView(upstream: Upstream) {
  const { health } = upstream;
  return {
    object: 'mcp_upstream' as const,
    id: upstream.id,
    projectId: upstream.projectId,
    name: upstream.name,
    slug: upstream.slug,
    url: upstream.url,
    transport: upstream.transport,
    auth: viewOfAuth(upstream.auth),
    timeoutMs: upstream.timeoutMs,
    newTools: upstream.newTools,
    health: {
      status: health.status,
      checkedAt: health.checkedAt?.toISOString() ?? null,
      latencyMs: health.latencyMs,
      errorKind: health.errorKind,
      error: health.error,
      lastSuccessAt: health.discoveredAt?.toISOString() ?? null,
      toolCount: upstream.toolCount,
      serverInfo: health.serverName !== null ? { name: health.serverName, version: health.serverVersion ?? '' } : null,
      protocolVersion: health.protocolVersion,
    },
    createdAt: upstream.createdAt.toISOString(),
    updatedAt: upstream.updatedAt.toISOString(),
  };
}

function viewOfAuth(auth: UpstreamAuth) {
  if (auth.type === 'header') return { type: 'header' as const, name: auth.name };
  if (auth.type === 'oauth') return { type: 'oauth' as const, oauthAppId: auth.oauthAppId, scopes: auth.scopes };
  return { type: 'none' as const };
}

/** `Issue Tracker (prod)` → `issue-tracker-prod`. */
export function slugOf(name: string): string {
  const base = name
    .normalize('NFKD')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, SLUG_MAX)
    .replace(/-+$/, '');
  return base === '' ? 'upstream' : base;
}

const idParams = z.strictObject({ id: resourceId.describe('MCP upstream id') });

type AuthInput = { type: 'none' } | { type: 'header'; name: string; value: string } | { type: 'oauth'; oauthAppId?: string | undefined; scopes?: string[] | undefined };

export function upstreamOperations(deps: UpstreamOperationDeps): AnyOperation[] {
  const { upstreams, identity, vault, http, events, clock, config } = deps;
  const refreshDeps: RefreshDeps = { ...deps };
  const upstreamKind = upstreamRecordKind(upstreams);
  const readUpstream = { kind: upstreamKind, access: 'read', in: 'path', field: 'id' } as const;
  const writeUpstream = { kind: upstreamKind, access: 'write', in: 'path', field: 'id' } as const;
  const projectOfBody = { kind: 'project', access: 'write', in: 'body', field: 'projectId', whenAbsent: 'default-project' } as const;

  /** The URL as it will be called, checked by the kernel's guard now (and again on every connection). */
  const checkedUrl = (raw: string) =>
    checkedCustomerUrl(http, deps.allowHttp, raw, { invalid: 'upstream_url_invalid', refused: 'upstream_url_refused', param: 'url', what: 'The upstream URL' });

  /**
   * Where an upstream is reached, from its transport and URL: the demo transport (only where
   * `demoUpstream` is on) has no URL and is stored with the DEMO_URL marker; the others need one.
   */
  async function checkedEndpoint(transport: UpstreamTransport, raw: string | undefined): Promise<string> {
    if (transport !== 'demo') {
      if (raw === undefined) throw new ApiError('upstream_url_invalid', `A ${transport} upstream needs its url`, { param: 'url' });
      return checkedUrl(raw);
    }
    if (!config.demoUpstream) {
      throw new ApiError('upstream_transport_invalid', 'The demo transport is off on this service (plugins.tool-gateway.demoUpstream)', { param: 'transport' });
    }
    if (raw !== undefined) throw new ApiError('upstream_transport_invalid', 'The demo transport has no URL: leave url out', { param: 'url' });
    return DEMO_URL;
  }

  /** The demo tools take no credential: one would be sent nowhere. */
  function demoWithoutAuth(transport: UpstreamTransport, auth: UpstreamAuth): void {
    if (transport === 'demo' && auth.type !== 'none') {
      throw new ApiError('upstream_transport_invalid', 'The demo transport takes no authentication: send auth {"type": "none"}', { param: 'auth' });
    }
  }

  async function checkedAuth(input: AuthInput | undefined, organizationId: string, projectId: string): Promise<{ auth: UpstreamAuth; value: string | null }> {
    if (!input || input.type === 'none') return { auth: { type: 'none' }, value: null };
    if (input.type === 'oauth') {
      if (input.oauthAppId !== undefined) {
        // An app of another organisation is as unknown as one that does not exist.
        const app = await deps.apps.get(organizationId, input.oauthAppId);
        if (!app) throw new ApiError('oauth_app_not_found', `No OAuth app ${input.oauthAppId}`, { param: 'auth.oauthAppId' });
        if (app.projectId !== projectId) throw new ApiError('oauth_app_other_project', undefined, { param: 'auth.oauthAppId' });
      }
      return { auth: { type: 'oauth', oauthAppId: input.oauthAppId ?? null, scopes: input.scopes ?? null }, value: null };
    }
    if (RESERVED_HEADERS.has(input.name.toLowerCase())) {
      throw new ApiError('upstream_header_invalid', `The gateway sets ${input.name} itself; send the credential in another header (Authorization, X-Api-Key…)`, {
        param: 'auth.name',
      });
    }
    return { auth: { type: 'header', name: input.name }, value: input.value };
  }

  const list = defineOperation({
    name: 'mcp.upstreams.list',
    method: 'GET',
    path: '/mcp/upstreams',
    summary: 'List the MCP servers registered as upstreams, newest first, with their health (never a header value)',
    scope: 'mcp:read',
    readOnly: true,
    query: pageQuery({ defaultLimit: MCP_PAGE_DEFAULT, maxLimit: MCP_PAGE_MAX, id: resourceId }).extend({
      projectId: resourceId.optional().describe('Only upstreams of this project'),
    }),
    resource: { kind: 'project', access: 'read', in: 'query', field: 'projectId' },
    output: upstreamListView,
    async handler({ query }, { credential }) {
      const visible = await visibleProjectIds(identity, credential);
      const page = await upstreams.page({ organizationId: credential.organizationId, visibleProjectIds: visible, projectId: query.projectId }, query);
      return listResponse(page, toUpstreamView);
    },
  });

  const create = defineOperation({
    name: 'mcp.upstreams.create',
    method: 'POST',
    path: '/mcp/upstreams',
    summary: "Register a customer's MCP server as an upstream; its tools are discovered at once",
    description:
      'The URL must be https on a public address: one that is or resolves to a private, loopback or link-local address is refused (upstream_url_refused), ' +
      'now and on every connection. The server is saved whatever its discovery gives: health says whether it answered, and tools arrive switched off unless ' +
      `newTools is enabled. At most ${config.maxUpstreamsPerOrganization} upstreams per organisation. POST /mcp/upstreams/test tries the same body without saving.`,
    scope: 'mcp:write',
    readOnly: false,
    body: createUpstreamRequest,
    resource: projectOfBody,
    errors: [
      'upstream_url_invalid',
      'upstream_url_refused',
      'upstream_transport_invalid',
      'upstream_header_invalid',
      'upstream_slug_taken',
      'upstream_limit_reached',
      'oauth_app_not_found',
      'oauth_app_other_project',
    ],
    output: upstreamView,
    status: 201,
    async handler({ body }, { credential, transaction, authorization }) {
      const projectId = authorizedProject(authorization).id;
      const transport = body.transport ?? 'streamable-http';
      const url = await checkedEndpoint(transport, body.url);
      const { auth, value } = await checkedAuth(body.auth, credential.organizationId, projectId);
      demoWithoutAuth(transport, auth);
      const id = randomUUID();
      const created = await transaction(async (tx) => {
        if ((await upstreams.countLocked(tx, credential.organizationId)) >= config.maxUpstreamsPerOrganization) {
          throw new ApiError('upstream_limit_reached', `This organisation has ${config.maxUpstreamsPerOrganization} MCP upstreams, as many as it may; delete one first`);
        }
        const slug = body.slug ?? (await freeSlug(tx, credential.organizationId, slugOf(body.name)));
        if (body.slug !== undefined && (await upstreams.slugTaken(tx, credential.organizationId, slug))) {
          throw new ApiError('upstream_slug_taken', `Another MCP upstream of this organisation has the slug ${slug}`, { param: 'slug' });
        }
        const settings: UpstreamSettings = {
          name: body.name,
          slug,
          url,
          transport,
          auth,
          timeoutMs: body.timeoutMs ?? DEFAULT_TIMEOUT_MS,
          newTools: body.newTools ?? 'disabled',
        };
        const upstream = await upstreams.create(tx, { id, organizationId: credential.organizationId, projectId, ...settings }, clock());
        if (value !== null) await storeHeaderValue(vault.within(tx), id, value);
        await events.emit(tx, { type: 'mcp.upstream.created', organizationId: credential.organizationId, subject: id, actor: actorOf(credential), data: eventData(upstream) });
        return upstream;
      });
      await refreshUpstream(refreshDeps, created, actorOf(credential));
      return toUpstreamView((await upstreams.get(credential.organizationId, id)) ?? created);
    },
  });

  /** The slug itself, or with -2, -3… when another upstream has it. */
  async function freeSlug(tx: Parameters<UpstreamStore['slugTaken']>[0], organizationId: string, base: string): Promise<string> {
    for (let n = 1; ; n++) {
      const suffix = n === 1 ? '' : `-${n}`;
      const candidate = `${base.slice(0, SLUG_MAX - suffix.length).replace(/-+$/, '')}${suffix}`;
      if (!(await upstreams.slugTaken(tx, organizationId, candidate))) return candidate;
    }
  }

  const test = defineOperation({
    name: 'mcp.upstreams.test',
    method: 'POST',
    path: '/mcp/upstreams/test',
    summary: 'Try an MCP server before registering it: connect, initialize, list its tools; nothing is saved',
    description:
      "Takes the body of POST /mcp/upstreams. Answers ok with the server's info, protocol version and tools, or ok false with the failure's kind and message " +
      '(a failure of the server is a 200 answer: the test ran). The URL is checked as for registering (upstream_url_refused).',
    scope: 'mcp:write',
    readOnly: false,
    body: createUpstreamRequest,
    resource: projectOfBody,
    errors: ['upstream_url_invalid', 'upstream_url_refused', 'upstream_transport_invalid', 'upstream_header_invalid', 'oauth_app_not_found', 'oauth_app_other_project'],
    output: upstreamTestView,
    async handler({ body }, { credential, authorization }) {
      const transport = body.transport ?? 'streamable-http';
      const url = await checkedEndpoint(transport, body.url);
      const { auth, value } = await checkedAuth(body.auth, credential.organizationId, authorizedProject(authorization).id);
      demoWithoutAuth(transport, auth);
      if (auth.type === 'oauth') {
        // Its tokens come from a sign-in, which needs the upstream saved: nothing to call the server with yet.
        const error = { kind: 'not_connected', message: 'An OAuth server is tried once it is registered and a person signed in (POST /mcp/upstreams/{id}/oauth/start)' };
        return { object: 'mcp_upstream_test' as const, ok: false, serverInfo: null, protocolVersion: null, tools: [], durationMs: 0, error };
      }
      const headers = auth.type === 'header' && value !== null ? { [auth.name]: value } : {};
      const discovery = await discover(refreshDeps, { url, transport, headers, timeoutMs: body.timeoutMs ?? DEFAULT_TIMEOUT_MS });
      if (!discovery.ok) {
        return {
          object: 'mcp_upstream_test' as const,
          ok: false,
          serverInfo: null,
          protocolVersion: null,
          tools: [],
          durationMs: Math.round(discovery.durationMs),
          error: { kind: discovery.errorKind, message: discovery.error },
        };
      }
      return {
        object: 'mcp_upstream_test' as const,
        ok: true,
        serverInfo: discovery.serverInfo,
        protocolVersion: discovery.protocolVersion,
        tools: discovery.tools.map((tool) => ({ name: tool.name, description: tool.description })),
        durationMs: Math.round(discovery.durationMs),
      };
    },
  });

  const get = defineOperation({
    name: 'mcp.upstreams.get',
    method: 'GET',
    path: '/mcp/upstreams/:id',
    summary: 'One MCP upstream with its health (never its header value)',
    scope: 'mcp:read',
    readOnly: true,
    params: idParams,
    resource: readUpstream,
    output: upstreamView,
    async handler(_input, { authorization }) {
      return toUpstreamView(authorizedRecord(authorization, upstreamKind).record);
    },
  });

  const update = defineOperation({
    name: 'mcp.upstreams.update',
    method: 'PATCH',
    path: '/mcp/upstreams/:id',
    summary: "Change an MCP upstream's name, slug, URL, transport, authentication, timeout or new-tools policy",
    description: "An upstream's project is fixed. A changed URL, transport or authentication is discovered again at once; its tools keep their ids and settings.",
    scope: 'mcp:write',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: updateUpstreamRequest,
    resource: writeUpstream,
    errors: [
      'upstream_url_invalid',
      'upstream_url_refused',
      'upstream_transport_invalid',
      'upstream_header_invalid',
      'upstream_slug_taken',
      'upstream_not_found',
      'oauth_app_not_found',
      'oauth_app_other_project',
    ],
    output: upstreamView,
    async handler({ params, body }, { credential, transaction, authorization }) {
      const current = authorizedRecord(authorization, upstreamKind).record;
      const transport = body.transport ?? current.transport;
      // A URL kept from before is checked again only when the transport changes (to or from demo, it must).
      const url =
        body.url === undefined && transport === current.transport ? current.url : await checkedEndpoint(transport, body.url ?? (current.transport === 'demo' ? undefined : current.url));
      const authChange = body.auth === undefined ? null : await checkedAuth(body.auth, credential.organizationId, current.projectId);
      demoWithoutAuth(transport, authChange?.auth ?? current.auth);
      const settings: UpstreamSettings = {
        name: body.name ?? current.name,
        slug: body.slug ?? current.slug,
        url,
        transport,
        auth: authChange?.auth ?? current.auth,
        timeoutMs: body.timeoutMs ?? current.timeoutMs,
        newTools: body.newTools ?? current.newTools,
      };
      const fields = Object.keys(body);
      const updated = await transaction(async (tx) => {
        if (body.slug !== undefined && (await upstreams.slugTaken(tx, credential.organizationId, body.slug, current.id))) {
          throw new ApiError('upstream_slug_taken', `Another MCP upstream of this organisation has the slug ${body.slug}`, { param: 'slug' });
        }
        const changed = await upstreams.update(tx, credential.organizationId, current.id, settings, clock());
        if (!changed) throw new ApiError('upstream_not_found', `No MCP upstream ${params.id}`, { param: 'id' });
        if (authChange) {
          const scoped = vault.within(tx);
          if (authChange.value !== null) await storeHeaderValue(scoped, current.id, authChange.value);
          else await forgetHeaderValue(scoped, current.id);
          // Tokens and a registered client belong to the authentication replaced: a new sign-in starts afresh.
          await deps.oauth.forget(tx, current.id);
        }
        await events.emit(tx, {
          type: 'mcp.upstream.updated',
          organizationId: credential.organizationId,
          subject: current.id,
          actor: actorOf(credential),
          data: { ...eventData(changed), fields },
        });
        return changed;
      });
      const reachedDifferently = body.url !== undefined || body.transport !== undefined || body.auth !== undefined;
      if (!reachedDifferently) return toUpstreamView(updated);
      await refreshUpstream(refreshDeps, updated, actorOf(credential));
      return toUpstreamView((await upstreams.get(credential.organizationId, current.id)) ?? updated);
    },
  });

  const remove = defineOperation({
    name: 'mcp.upstreams.delete',
    method: 'DELETE',
    path: '/mcp/upstreams/:id',
    summary: 'Delete an MCP upstream with its tools and header value',
    description: 'Its tools leave every bundle that held them.',
    scope: 'mcp:write',
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    resource: writeUpstream,
    output: upstreamRemovalView,
    async handler(_input, { credential, transaction, authorization }) {
      const upstream = authorizedRecord(authorization, upstreamKind).record;
      await transaction(async (tx) => {
        await deps.oauth.forget(tx, upstream.id);
        await upstreams.delete(tx, credential.organizationId, upstream.id);
        await forgetHeaderValuesOf(vault.within(tx), [upstream.id]);
        await events.emit(tx, { type: 'mcp.upstream.deleted', organizationId: credential.organizationId, subject: upstream.id, actor: actorOf(credential), data: eventData(upstream) });
      });
      return { object: 'ack' as const, ok: true as const, id: upstream.id };
    },
  });

  const refresh = defineOperation({
    name: 'mcp.upstreams.refresh',
    method: 'POST',
    path: '/mcp/upstreams/:id/refresh',
    summary: "List an MCP upstream's tools now and answer what changed",
    description:
      "New tools arrive switched on or off by the upstream's newTools; tools the server no longer lists are deleted (and leave every bundle); changed descriptions, " +
      "schemas and annotations are updated, the customer's settings kept. A failed discovery changes no tool: ok is false with the error, and health says so. " +
      `Upstreams are also refreshed every ${Math.round(config.refreshIntervalMs / 60_000)} min.`,
    scope: 'mcp:write',
    readOnly: false,
    params: idParams,
    resource: writeUpstream,
    output: refreshView,
    async handler(_input, { credential, authorization }) {
      const upstream = authorizedRecord(authorization, upstreamKind).record;
      const { discovery, diff } = await refreshUpstream(refreshDeps, upstream, actorOf(credential));
      const now = toUpstreamView((await upstreams.get(credential.organizationId, upstream.id)) ?? upstream);
      const changes = diff ?? { added: [], removed: [], changed: [] };
      return {
        object: 'mcp_upstream_refresh' as const,
        ok: discovery.ok,
        ...changes,
        ...(discovery.ok ? {} : { error: { kind: discovery.errorKind, message: discovery.error } }),
        upstream: now,
      };
    },
  });

  return [list, create, test, get, update, remove, refresh];
}

function eventData(upstream: Upstream) {
  return { upstreamId: upstream.id, projectId: upstream.projectId, name: upstream.name, slug: upstream.slug, origin: originOf(upstream.url) };
}
