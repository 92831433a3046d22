import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';

const EXAMPLE_UPSTREAM = '7a1e4c2b-3d5f-4a6b-8c9d-0e1f2a3b4c5d';
const EXAMPLE_PROJECT = '0b5d7c7e-2f4e-4d0a-9a51-2f6f1c1f0a11';

const upstreamFields = {
  upstreamId: z.string(),
  projectId: z.string().describe("The upstream's project"),
  name: z.string(),
  slug: z.string().describe('The prefix of its tools at /mcp/gateway'),
  origin: z.string().describe("The upstream URL's scheme, host and port (its path and query may hold a token, so they are left out)"),
};
const upstreamExample = { upstreamId: EXAMPLE_UPSTREAM, projectId: EXAMPLE_PROJECT, name: 'Issue tracker', slug: 'issue-tracker', origin: 'https://mcp.example.com' };

const EXAMPLE_GROUP = '3c9a1f7d-6b2e-4c8a-9f01-5d2e7b3a4c6f';
const groupFields = {
  groupId: z.string(),
  projectId: z.string().describe("The group's project"),
  name: z.string(),
};
const groupExample = { groupId: EXAMPLE_GROUP, projectId: EXAMPLE_PROJECT, name: 'Support desk' };
const grantFields = {
  grantId: z.string(),
  groupId: z.string(),
  keyId: z.string().describe('The key given the group'),
  projectId: z.string(),
  expiresAt: z.string().nullable(),
};
const grantExample = { grantId: 'c2f4a6b8-1d3e-4f5a-8b7c-9d0e1f2a3b4c', groupId: EXAMPLE_GROUP, keyId: '5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9', projectId: EXAMPLE_PROJECT, expiresAt: null };

const approvalFields = {
  approvalId: z.string(),
  projectId: z.string(),
  keyId: z.string().describe('The key whose call waits for the decision'),
  toolId: z.string(),
  upstreamId: z.string(),
  gatewayName: z.string().describe('The name the agent called the tool by'),
  argumentsHash: z.string().describe("SHA-256 (hex) of the arguments' canonical JSON: the arguments are never stored or sent"),
  requestId: z.string().describe('The MCP request of the call that asked first'),
};
const approvalExample = {
  approvalId: 'a4b6c8d0-2e4f-4a6b-8c0d-1e3f5a7b9c2d',
  projectId: EXAMPLE_PROJECT,
  keyId: '5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a8b9',
  toolId: 'd1e2f3a4-b5c6-4d7e-8f9a-0b1c2d3e4f5a',
  upstreamId: EXAMPLE_UPSTREAM,
  gatewayName: 'issue-tracker__close_issue',
  argumentsHash: '9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
  requestId: 'req_8c1f2a',
};
const decision = {
  decidedBy: z.string().describe('The person (owner or admin) who decided'),
  reason: z.string().nullable(),
};
const oauthAppFields = {
  oauthAppId: z.string(),
  projectId: z.string(),
  name: z.string(),
  authorizationServerOrigin: z.string().describe("The authorization server URL's scheme, host and port"),
};
const oauthAppExample = { oauthAppId: 'e1d2c3b4-a5f6-4e7d-8c9b-0a1b2c3d4e5f', projectId: EXAMPLE_PROJECT, name: 'GitHub', authorizationServerOrigin: 'https://github.com' };

/** The tool gateway's event types: upstreams registered, changed and removed, tools the servers changed, and servers gone unhealthy. */
export const TOOL_GATEWAY_EVENTS = defineEventTypes('tool-gateway', {
  'mcp.upstream.created': {
    schema: z.object(upstreamFields),
    description: "A customer's MCP server was registered as an upstream of the tool gateway",
    public: true,
    example: upstreamExample,
  },
  'mcp.upstream.updated': {
    schema: z.object({ ...upstreamFields, fields: z.array(z.string()).describe('The settings that changed (never a secret value)') }),
    description: "An MCP upstream's settings were changed",
    public: true,
    example: { ...upstreamExample, fields: ['timeoutMs', 'auth'] },
  },
  'mcp.upstream.deleted': {
    schema: z.object(upstreamFields),
    description: 'An MCP upstream was deleted with its tools',
    public: true,
    example: upstreamExample,
  },
  'mcp.upstream.unhealthy': {
    schema: z.object({ ...upstreamFields, errorKind: z.string(), error: z.string(), checkedAt: z.string() }),
    description: 'An MCP upstream that was healthy (or never checked) failed its discovery; its tools are kept as they were',
    public: true,
    example: { ...upstreamExample, errorKind: 'connect', error: 'POST https://mcp.example.com: no answer, the connection failed (ECONNREFUSED)', checkedAt: '2026-11-20T08:00:00.000Z' },
  },
  'mcp.upstream.needs_sign_in': {
    schema: z.object({ ...upstreamFields, reason: z.string().describe('Why, in our words (never a token)') }),
    description: "An OAuth upstream's authorization server refused its refresh token: the gateway cannot call it until a person signs in again",
    public: true,
    example: { ...upstreamExample, reason: 'https://auth.example.com refused the refresh (invalid_grant)' },
  },
  'mcp.oauth_app.created': {
    schema: z.object(oauthAppFields),
    description: "A customer's own OAuth client (client id and secret at an authorization server) was stored for upstreams to sign in with",
    public: true,
    example: oauthAppExample,
  },
  'mcp.oauth_app.deleted': {
    schema: z.object(oauthAppFields),
    description: 'An OAuth app was deleted with its client secret',
    public: true,
    example: oauthAppExample,
  },
  'mcp.tools.changed': {
    schema: z.object({
      upstreamId: z.string(),
      projectId: z.string(),
      slug: z.string(),
      added: z.array(z.string()).describe('Names of tools the server lists now and did not before'),
      removed: z.array(z.string()).describe('Names of tools the server no longer lists (they are deleted)'),
      changed: z.array(z.string()).describe('Names of tools whose description, schemas or annotations changed'),
    }),
    description: "A refresh found an MCP upstream's tools changed: tools added, removed or changed by the server",
    public: true,
    example: { upstreamId: EXAMPLE_UPSTREAM, projectId: EXAMPLE_PROJECT, slug: 'issue-tracker', added: ['create_issue'], removed: [], changed: ['search'] },
  },
  'mcp.group.created': {
    schema: z.object(groupFields),
    description: 'A tool group (a bundle of tools to grant to keys) was created',
    public: true,
    example: groupExample,
  },
  'mcp.group.updated': {
    schema: z.object({ ...groupFields, fields: z.array(z.string()).describe('What changed: name, description, tools') }),
    description: "A tool group's name, description or tools changed",
    public: true,
    example: { ...groupExample, fields: ['tools'] },
  },
  'mcp.group.deleted': {
    schema: z.object(groupFields),
    description: 'A tool group was deleted with its grants',
    public: true,
    example: groupExample,
  },
  'mcp.grant.created': {
    schema: z.object(grantFields),
    description: 'A tool group was granted to a key: the key sees its switched-on tools at /mcp/gateway',
    public: true,
    example: grantExample,
  },
  'mcp.grant.deleted': {
    schema: z.object(grantFields),
    description: "A key's grant of a tool group was withdrawn",
    public: true,
    example: grantExample,
  },
  'mcp.approval.requested': {
    schema: z.object({ ...approvalFields, expiresAt: z.string().describe('When it lapses undecided') }),
    description: "A tool call needs a person's approval: it waits for a decision, or is retried once one is made",
    public: true,
    example: { ...approvalExample, expiresAt: '2026-11-20T08:10:00.000Z' },
  },
  'mcp.approval.approved': {
    schema: z.object({ ...approvalFields, ...decision, expiresAt: z.string().describe('The call must run by then (retried if it stopped waiting)') }),
    description: 'A person approved a tool call: it runs once',
    public: true,
    example: { ...approvalExample, decidedBy: '6f7a8b9c-0d1e-4f2a-b3c4-d5e6f7a8b9c0', reason: 'Duplicate issue', expiresAt: '2026-11-20T08:14:00.000Z' },
  },
  'mcp.approval.denied': {
    schema: z.object({ ...approvalFields, ...decision }),
    description: 'A person denied a tool call: it answers the agent an error with the reason',
    public: true,
    example: { ...approvalExample, decidedBy: '6f7a8b9c-0d1e-4f2a-b3c4-d5e6f7a8b9c0', reason: 'Not this one' },
  },
  'mcp.approval.expired': {
    schema: z.object({
      ...approvalFields,
      wasApproved: z.boolean().describe('true: it was approved but the call never ran in time; false: nobody decided in time'),
      reason: z.string().nullable().describe("Set when it lapsed early because the tool's approval policy, input schema or annotations changed"),
    }),
    description: 'A tool call approval lapsed: undecided (the call is denied) or approved but never used; a later call asks again',
    public: true,
    example: { ...approvalExample, wasApproved: false, reason: null },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof TOOL_GATEWAY_EVENTS> {}
}
