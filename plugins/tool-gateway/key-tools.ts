import { createHash } from 'node:crypto';
import type { ApiKey } from '../../core/ports/identity.ts';
import type { GrantStore } from './grant-store.ts';
import type { ProjectMode, SwitchStore } from './switch-store.ts';
import type { McpTool, ToolStore } from './tool-store.ts';
import type { UpstreamStore } from './upstream-store.ts';

/** The longest tool name MCP clients accept. */
export const GATEWAY_NAME_MAX = 64;
/** `_` and 8 hex digits of the tool id's SHA-256: what tells apart a name that was cut or collided. */
const SUFFIX_LENGTH = 9;

/** What naming needs of a tool. */
export interface NameableTool {
  id: string;
  slug: string;
  name: string;
  alias: string | null;
}

const natural = (tool: NameableTool) => `${tool.slug}__${tool.alias ?? tool.name}`;

function suffixed(tool: NameableTool): string {
  const hash = createHash('sha256')
    .update(tool.id)
    .digest('hex')
    .slice(0, SUFFIX_LENGTH - 1);
  return `${natural(tool).slice(0, GATEWAY_NAME_MAX - SUFFIX_LENGTH)}_${hash}`;
}

/**
 * Each tool's name at /mcp/gateway, the same for the same tools whatever their order:
 * - `<upstream slug>__<alias or name at the server>`;
 * - a name over 64 characters is cut to 55 and given `_` and 8 hex digits of its tool id's SHA-256;
 * - tools whose names come out equal (a new server name equal to another tool's alias, two long
 *   names with the same first 55 characters): an aliased tool keeps the name (the alias wins), else
 *   the smallest tool id does; every other one takes the suffix. The tool id is stable across
 *   refreshes, so a name changes only when the tools it collides with change.
 */
export function gatewayNames(tools: readonly NameableTool[]): Map<string, string> {
  const candidates = new Map<string, NameableTool[]>();
  for (const tool of tools) {
    const name = natural(tool);
    const candidate = name.length > GATEWAY_NAME_MAX ? suffixed(tool) : name;
    candidates.set(candidate, [...(candidates.get(candidate) ?? []), tool]);
  }
  const names = new Map<string, string>();
  for (const [candidate, holders] of candidates) {
    const ranked = [...holders].sort((a, b) => Number(b.alias !== null) - Number(a.alias !== null) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    for (const [index, tool] of ranked.entries()) names.set(tool.id, index === 0 ? candidate : suffixed(tool));
  }
  return names;
}

/** A tool as a key sees it at /mcp/gateway. */
export interface KeyTool {
  name: string;
  tool: McpTool;
  slug: string;
  /** The key's granted groups holding it (empty in a `full` project, where no grant is needed). */
  groupIds: string[];
}

/**
 * A key's tools, in a deterministic order (by name): none in an `off` project, every switched-on
 * tool of the project in a `full` one, and in a `governed` one the union of the switched-on tools
 * of its unexpired grants' groups. Names are made over the tools the key sees, so the same tool
 * keeps its name unless a tool it collides with appears or leaves.
 */
export function keyToolList(mode: ProjectMode, tools: readonly { tool: McpTool; slug: string; groupIds: string[] }[]): KeyTool[] {
  if (mode === 'off') return [];
  const names = gatewayNames(tools.map(({ tool, slug }) => ({ id: tool.id, slug, name: tool.name, alias: tool.alias })));
  return tools.map((each) => ({ ...each, name: names.get(each.tool.id)! })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export interface KeyToolsDeps {
  tools: ToolStore;
  upstreams: UpstreamStore;
  switches: SwitchStore;
  grants: GrantStore;
}

/** What `key` sees at /mcp/gateway at `now`: its project's mode, and its tools by keyToolList. */
export async function toolsOfKey(deps: KeyToolsDeps, key: Pick<ApiKey, 'id' | 'organizationId' | 'projectId'>, now: Date): Promise<{ mode: ProjectMode; tools: KeyTool[] }> {
  const mode = await deps.switches.modeOf(key.projectId);
  if (mode === 'off') return { mode, tools: [] };
  let found: { tool: McpTool; groupIds: string[] }[];
  if (mode === 'full') {
    found = (await deps.tools.enabledOfProject(key.organizationId, key.projectId)).map((tool) => ({ tool, groupIds: [] }));
  } else {
    const granted = await deps.grants.grantedTools(key.id, key.projectId, now);
    const tools = await deps.tools.some(key.organizationId, [...granted.keys()], [key.projectId]);
    found = tools.map((tool) => ({ tool, groupIds: granted.get(tool.id) ?? [] }));
  }
  const slugs = new Map<string, string>();
  for (const upstreamId of new Set(found.map(({ tool }) => tool.upstreamId))) {
    const upstream = await deps.upstreams.get(key.organizationId, upstreamId);
    if (upstream) slugs.set(upstreamId, upstream.slug);
  }
  const named = found.filter(({ tool }) => slugs.has(tool.upstreamId)).map((each) => ({ ...each, slug: slugs.get(each.tool.upstreamId)! }));
  return { mode, tools: keyToolList(mode, named) };
}
