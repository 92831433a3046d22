import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { DomainEvents } from '../../core/events/domain-events.ts';
import type { OutboundHttpClient } from '../../core/net/outbound-http-client.ts';
import type { Database } from '../../core/ports/database.ts';
import type { EventActor } from '../../core/ports/events.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import type { ToolGatewayConfig } from './tool-gateway-config.ts';
import type { ToolDefinition, ToolStore } from './tool-store.ts';
import { credentialHeaders, UpstreamFailure } from './upstream-connection.ts';
import { type Discovery, discoverTools } from './upstream-discovery.ts';
import type { UpstreamOAuth } from './upstream-oauth.ts';
import { upstreamHeaders } from './upstream-secrets.ts';
import type { Upstream, UpstreamStore } from './upstream-store.ts';

export interface RefreshDeps {
  database: Database;
  upstreams: UpstreamStore;
  tools: ToolStore;
  vault: SecretVault;
  oauth: UpstreamOAuth;
  http: OutboundHttpClient;
  events: DomainEvents;
  clock: () => Date;
  config: ToolGatewayConfig;
}

/** What a refresh changed, by the tools' names at the server. */
export interface ToolDiff {
  added: string[];
  removed: string[];
  changed: string[];
}

export interface RefreshOutcome {
  discovery: Discovery;
  /** Null when the discovery failed: nothing was changed. */
  diff: ToolDiff | null;
}

/** What a message or event may name of a server: its origin (the demo's `demo:` marker has none, and is said as it is). */
export const originOf = (url: string) => {
  const { origin } = new URL(url);
  return origin === 'null' ? url : origin;
};

const limitsOf = (config: ToolGatewayConfig) => ({ maxTools: config.maxToolsPerUpstream, maxPages: config.maxListPages, maxAnswerBytes: config.maxAnswerBytes });

/** Lists a server's tools without saving anything (`POST /upstreams/test`, and each refresh). */
export function discover(deps: Pick<RefreshDeps, 'http' | 'config'>, target: Parameters<typeof discoverTools>[1]): Promise<Discovery> {
  return discoverTools(deps.http, target, limitsOf(deps.config));
}

/**
 * Lists the upstream's tools again and brings the cache in line, in one transaction with the
 * upstream's tools locked (so two refreshes of one upstream apply one after the other): a tool the
 * server lists for the first time arrives switched on or off by the upstream's policy; one it no
 * longer lists is deleted (and with it whatever refers to it); one whose description, schemas or
 * annotations changed is updated, its customer settings kept. A failed discovery changes no tool:
 * it is recorded in the upstream's health, and a healthy upstream turning unhealthy is an event.
 */
export async function refreshUpstream(deps: RefreshDeps, upstream: Upstream, actor: EventActor | null): Promise<RefreshOutcome> {
  const discovery = await discoverWithCredential(deps, upstream);
  const checkedAt = deps.clock();
  const event = { upstreamId: upstream.id, projectId: upstream.projectId, slug: upstream.slug };
  return deps.database.transaction(async (tx) => {
    if (!discovery.ok) {
      const previous = await deps.upstreams.recordHealth(tx, upstream.id, { ok: false, checkedAt, latencyMs: discovery.durationMs, errorKind: discovery.errorKind, error: discovery.error });
      if (previous !== null && previous !== 'error') {
        await deps.events.emit(tx, {
          type: 'mcp.upstream.unhealthy',
          organizationId: upstream.organizationId,
          subject: upstream.id,
          actor,
          data: { ...event, name: upstream.name, origin: originOf(upstream.url), errorKind: discovery.errorKind, error: discovery.error, checkedAt: checkedAt.toISOString() },
        });
      }
      return { discovery, diff: null };
    }
    const previous = await deps.upstreams.recordHealth(tx, upstream.id, {
      ok: true,
      checkedAt,
      latencyMs: discovery.durationMs,
      serverName: discovery.serverInfo?.name ?? null,
      serverVersion: discovery.serverInfo?.version ?? null,
      protocolVersion: discovery.protocolVersion,
    });
    // Deleted while the server was being asked: nothing to bring in line.
    if (previous === null) return { discovery, diff: null };
    const cached = new Map((await deps.tools.ofUpstreamLocked(tx, upstream.id)).map((tool) => [tool.name, tool]));
    const diff: ToolDiff = { added: [], removed: [], changed: [] };
    for (const listed of discovery.tools) {
      const known = cached.get(listed.name);
      if (!known) {
        const enabled = upstream.newTools === 'enabled';
        await deps.tools.insert(tx, { id: randomUUID(), upstreamId: upstream.id, organizationId: upstream.organizationId, projectId: upstream.projectId, enabled, ...listed }, checkedAt);
        diff.added.push(listed.name);
      } else if (!sameDefinition(known, listed)) {
        await deps.tools.redefine(tx, known.id, listed, checkedAt);
        diff.changed.push(listed.name);
      }
    }
    const listedNames = new Set(discovery.tools.map((tool) => tool.name));
    const gone = [...cached.values()].filter((tool) => !listedNames.has(tool.name));
    await deps.tools.deleteMany(
      tx,
      gone.map((tool) => tool.id),
    );
    diff.removed.push(...gone.map((tool) => tool.name));
    await deps.tools.seen(tx, upstream.id, checkedAt);
    if (diff.added.length + diff.removed.length + diff.changed.length > 0) {
      await deps.events.emit(tx, { type: 'mcp.tools.changed', organizationId: upstream.organizationId, subject: upstream.id, actor, data: { ...event, ...diff } });
    }
    return { discovery, diff };
  });
}

/** Discovery with the upstream's credential; an OAuth state that keeps the gateway from calling at all is a failed discovery (health shows it). */
async function discoverWithCredential(deps: RefreshDeps, upstream: Upstream): Promise<Discovery> {
  let headers: Record<string, string>;
  try {
    headers = await credentialHeaders(() => upstreamHeaders(deps, upstream));
  } catch (error) {
    if (!(error instanceof UpstreamFailure)) throw error;
    return { ok: false, errorKind: error.kind, error: error.message, durationMs: 0 };
  }
  return discover(deps, { url: upstream.url, transport: upstream.transport, headers, timeoutMs: upstream.timeoutMs, upstreamId: upstream.id });
}

function sameDefinition(cached: ToolDefinition, listed: ToolDefinition): boolean {
  return (
    cached.title === listed.title &&
    cached.description === listed.description &&
    isDeepStrictEqual(cached.inputSchema, listed.inputSchema) &&
    isDeepStrictEqual(cached.outputSchema, listed.outputSchema) &&
    isDeepStrictEqual(cached.annotations, listed.annotations)
  );
}
