import { InferenceAdmissionPoint } from '../../core/gateway/inference-admission.ts';
import { mountMcpEndpoint } from '../../core/http/mcp-endpoint.ts';
import { definePeriodic } from '../../core/jobs/queue-definitions.ts';
import { KeyCreationChecksPoint } from '../../core/identity/key-creation-checks.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { createToken } from '../../core/kernel/container.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { definePlugin, type PluginContext } from '../../core/kernel/plugin.ts';
import { approvalOperations } from './approval-operations.ts';
import { ApprovalStore } from './approval-store.ts';
import { Approvals } from './approvals.ts';
import { UpstreamSessions } from './upstream-sessions.ts';
import { callOperations } from './call-operations.ts';
import { CallStore } from './call-store.ts';
import { gatewayEndpoint } from './gateway-endpoint.ts';
import { GrantStore } from './grant-store.ts';
import { grantOperations } from './grant-operations.ts';
import { groupOperations } from './group-operations.ts';
import { GroupStore } from './group-store.ts';
import { refreshQueue } from './refresh-queue.ts';
import { SwitchStore } from './switch-store.ts';
import { type ToolGatewayConfig, toolGatewayConfigSchema } from './tool-gateway-config.ts';
import { toolGatewayMigrations } from './tool-gateway-migrations.ts';
import { toolOperations } from './tool-operations.ts';
import { type RefreshDeps, refreshUpstream } from './tool-refresh.ts';
import { ToolStore } from './tool-store.ts';
import { OAuthAppStore } from './oauth-app-store.ts';
import { oauthAppOperations } from './oauth-app-operations.ts';
import { APP_KIND, FLOW_KIND, UpstreamOAuth } from './upstream-oauth.ts';
import { mountOAuthCallback, upstreamOAuthOperations } from './upstream-oauth-operations.ts';
import { UpstreamOAuthStore } from './upstream-oauth-store.ts';
import { upstreamOperations } from './upstream-operations.ts';
import { forgetHeaderValuesOf } from './upstream-secrets.ts';
import { UpstreamStore } from './upstream-store.ts';
// Catalogues the codes and event types this plugin answers with and emits.
import './tool-gateway-errors.ts';
import './tool-gateway-events.ts';

export const ToolGatewayTokens = {
  /** The approval gate (approval-gate.ts) the call path asks; one per process, subscribed to decisions made anywhere. */
  Approvals: createToken<Approvals>('ToolGatewayApprovals'),
  /** Tool calls' open MCP sessions to upstreams (upstream-sessions.ts); closed at stop. */
  Sessions: createToken<UpstreamSessions>('ToolGatewayUpstreamSessions'),
};

/** Upstreams queued per sweep at most: a backlog is worked through over the next sweeps. */
const SWEEP_BATCH = 500;

function stores(ctx: PluginContext<ToolGatewayConfig>) {
  const database = ctx.container.resolve(Tokens.Database);
  return {
    database,
    upstreams: new UpstreamStore(database),
    tools: new ToolStore(database),
    switches: new SwitchStore(database),
    groups: new GroupStore(database),
    grants: new GrantStore(database),
    calls: new CallStore(database),
    approvals: new ApprovalStore(database),
    apps: new OAuthAppStore(database),
    connections: new UpstreamOAuthStore(database),
  };
}

function upstreamOAuth(ctx: PluginContext<ToolGatewayConfig>): UpstreamOAuth {
  const { container, config, appConfig } = ctx;
  const { database, apps, connections } = stores(ctx);
  return new UpstreamOAuth({
    database,
    apps,
    connections,
    vault: container.resolve(Tokens.Secrets),
    http: container.resolve(Tokens.OutboundHttp),
    events: container.resolve(Tokens.Events),
    clock: container.resolve(Tokens.Clock),
    config,
    publicUrl: appConfig.server.publicUrl,
  });
}

function refreshDeps(ctx: PluginContext<ToolGatewayConfig>): RefreshDeps {
  const { container, config } = ctx;
  const { database, upstreams, tools } = stores(ctx);
  return {
    database,
    upstreams,
    tools,
    vault: container.resolve(Tokens.Secrets),
    oauth: upstreamOAuth(ctx),
    http: container.resolve(Tokens.OutboundHttp),
    events: container.resolve(Tokens.Events),
    clock: container.resolve(Tokens.Clock),
    config,
  };
}

/**
 * The tool gateway, first slice: customers' MCP servers (upstreams) with their discovered tools,
 * each tool's switch, alias and approval policy, and each project's mode. plugins/tool-gateway/README.md has the design.
 */
export const toolGatewayPlugin = definePlugin({
  name: 'tool-gateway',
  description: "Tool gateway: customers' MCP servers, their tools and switches",
  configSchema: toolGatewayConfigSchema,
  migrations: toolGatewayMigrations,
  register(ctx) {
    const { database, upstreams, tools, switches, groups, grants, approvals, calls, apps, connections } = stores(ctx);
    const vault = ctx.container.resolve(Tokens.Secrets);
    ctx.container.bindValue(
      ToolGatewayTokens.Approvals,
      new Approvals({
        database,
        store: approvals,
        pubsub: ctx.container.resolve(Tokens.Coordination).pubsub,
        events: ctx.container.resolve(Tokens.Events),
        clock: ctx.container.resolve(Tokens.Clock),
        config: ctx.config,
      }),
    );
    const { maxCallAnswerBytes, sessionIdleMs, maxUpstreamSessions } = ctx.config;
    ctx.container.bindValue(
      ToolGatewayTokens.Sessions,
      new UpstreamSessions(ctx.container.resolve(Tokens.OutboundHttp), { maxAnswerBytes: maxCallAnswerBytes, idleMs: sessionIdleMs, maxSessions: maxUpstreamSessions }),
    );
    // Call rows and approvals, grants and app choices before groups, groups and their members before tools.
    ctx.extensions.contribute(OrganizationErasersPoint, { name: 'mcp tool calls', erase: (tx, organizationId) => calls.eraseOrganization(tx, organizationId) });
    ctx.extensions.contribute(OrganizationErasersPoint, { name: 'mcp approvals', erase: (tx, organizationId) => approvals.eraseOrganization(tx, organizationId) });
    ctx.extensions.contribute(OrganizationErasersPoint, { name: 'mcp grants', erase: (tx, organizationId) => grants.eraseOrganization(tx, organizationId) });
    ctx.extensions.contribute(OrganizationErasersPoint, { name: 'mcp groups', erase: (tx, organizationId) => groups.eraseOrganization(tx, organizationId) });
    ctx.extensions.contribute(OrganizationErasersPoint, { name: 'mcp project switches', erase: (tx, organizationId) => switches.eraseOrganization(tx, organizationId) });
    ctx.extensions.contribute(OrganizationErasersPoint, { name: 'mcp tools', erase: (tx, organizationId) => tools.eraseOrganization(tx, organizationId) });
    // Sign-ins (with their PKCE verifiers) and OAuth connections before their upstreams; apps after them (an app in use is kept by its upstreams).
    ctx.extensions.contribute(OrganizationErasersPoint, {
      name: 'mcp oauth sign-ins',
      async erase(tx, organizationId) {
        const ids = await connections.eraseOrganization(tx, organizationId);
        await vault.within(tx).deleteOwners(FLOW_KIND, ids);
        return ids.length;
      },
    });
    ctx.extensions.contribute(OrganizationErasersPoint, {
      name: 'mcp upstreams',
      async erase(tx, organizationId) {
        const ids = await upstreams.eraseOrganization(tx, organizationId);
        await forgetHeaderValuesOf(vault.within(tx), ids);
        return ids.length;
      },
    });
    ctx.extensions.contribute(OrganizationErasersPoint, {
      name: 'mcp oauth apps',
      async erase(tx, organizationId) {
        const ids = await apps.eraseOrganization(tx, organizationId);
        await vault.within(tx).deleteOwners(APP_KIND, ids);
        return ids.length;
      },
    });
    // A key of a full-access project gets every switched-on tool of it: no new key may be made there.
    ctx.extensions.contribute(KeyCreationChecksPoint, {
      name: 'tool-gateway',
      errors: ['project_full_tool_access'],
      async check(tx, { projectId }) {
        if ((await switches.modeOf(projectId, tx)) === 'full') {
          throw new ApiError('project_full_tool_access', undefined, { param: 'projectId' });
        }
      },
    });
  },
  operations: (ctx) => {
    const { container, config, appConfig } = ctx;
    const deps = refreshDeps(ctx);
    const { switches, groups, grants, calls, approvals: approvalStore, apps, connections } = stores(ctx);
    const identity = container.resolve(Tokens.Identity);
    const { tools, upstreams, events, clock, oauth, vault, http, database } = deps;
    const approvals = container.resolve(ToolGatewayTokens.Approvals);
    const allowHttp = appConfig.outbound.allowPrivateNetwork;
    return [
      ...callOperations({ calls, upstreams, tools, switches, groups, grants, approvals, identity, clock }),
      ...upstreamOperations({ ...deps, apps, identity, allowHttp, config }),
      ...oauthAppOperations({ database, apps, identity, vault, http, events, clock, allowHttp }),
      ...upstreamOAuthOperations({ upstreams, connections, oauth, clock, afterConnect: async (upstream) => void (await refreshUpstream(deps, upstream, null)) }),
      ...toolOperations({ tools, upstreams, switches, identity, clock }),
      ...groupOperations({ groups, tools, upstreams, identity, events, clock }),
      ...grantOperations({ groups, grants, tools, upstreams, switches, identity, events, clock }),
      ...approvalOperations({ store: approvalStore, approvals, identity, events, clock, config }),
    ];
  },
  routes(app, ctx) {
    const { container, config } = ctx;
    const deps = refreshDeps(ctx);
    const { upstreams, tools, switches, grants, calls } = stores(ctx);
    mountOAuthCallback(app, { oauth: deps.oauth, upstreams, afterConnect: async (upstream) => void (await refreshUpstream(deps, upstream, null)) });
    const serve = gatewayEndpoint({
      upstreams,
      tools,
      switches,
      grants,
      calls,
      vault: deps.vault,
      oauth: deps.oauth,
      sessions: container.resolve(ToolGatewayTokens.Sessions),
      admission: ctx.extensions.get(InferenceAdmissionPoint),
      approvals: container.resolve(ToolGatewayTokens.Approvals),
      metrics: container.resolve(Tokens.Metrics),
      clock: deps.clock,
      config,
    });
    // API keys only; the key's grants (or its project's full mode) are the authorization, not a scope.
    mountMcpEndpoint(app, '/mcp/gateway', { accepts: ['key'], scope: null, serve });
  },
  queues: (ctx) => {
    const deps = refreshDeps(ctx);
    return [
      refreshQueue(ctx.config).handle(async (job) => {
        const upstream = await deps.upstreams.byId(job.payload.upstreamId);
        // Deleted since it was queued.
        if (!upstream) return;
        await refreshUpstream(deps, upstream, null);
      }),
    ];
  },
  start: ({ container }) => container.resolve(ToolGatewayTokens.Approvals).start(),
  async stop({ container }) {
    await container.resolve(ToolGatewayTokens.Approvals).stop();
    await container.resolve(ToolGatewayTokens.Sessions).close();
  },
  periodic: (ctx) => {
    const { upstreams, connections, database } = stores(ctx);
    const vault = ctx.container.resolve(Tokens.Secrets);
    const jobs = ctx.container.resolve(Tokens.Jobs);
    const clock = ctx.container.resolve(Tokens.Clock);
    const queue = refreshQueue(ctx.config);
    return [
      definePeriodic({
        name: 'tool-gateway.refresh-sweep',
        everyMs: ctx.config.refreshSweepMs,
        async run() {
          const now = clock();
          const due = await upstreams.dueForRefresh(new Date(now.getTime() - ctx.config.refreshIntervalMs), SWEEP_BATCH);
          // One job per upstream and interval: a sweep that runs again before the job did queues nothing new.
          const slot = Math.floor(now.getTime() / ctx.config.refreshIntervalMs);
          await jobs.enqueueMany(
            queue,
            due.map((upstreamId) => ({ payload: { upstreamId }, idempotencyKey: `${upstreamId}:${slot}` })),
          );
          // Sign-ins a day past their expiry go, with their PKCE verifiers (their status was for polling, soon after).
          await database.transaction(async (tx) => {
            const gone = await connections.pruneFlows(tx, new Date(now.getTime() - 86_400_000));
            await vault.within(tx).deleteOwners(FLOW_KIND, gone);
          });
        },
      }),
      // Expiry is an observable deny: each lapsed approval is an event and wakes its waiting call.
      definePeriodic({
        name: 'tool-gateway.approval-expiry',
        everyMs: ctx.config.approvalSweepMs,
        async run() {
          await ctx.container.resolve(ToolGatewayTokens.Approvals).expireDue();
        },
      }),
    ];
  },
});
