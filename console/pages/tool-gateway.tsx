import { useEffect, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import { unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { count } from '../format.ts';
import { may } from '../permissions.ts';
import { FormError, Loading, Time } from '../ui.tsx';
import { useVisiblePolling } from '../visible-polling.ts';
import { GroupsAndGrants } from './tool-groups.tsx';

type Upstream = components['schemas']['McpUpstream'];
type Tool = components['schemas']['McpTool'];
type Waiting = components['schemas']['McpWaitingApprovalQueue'];

/** How often the waiting approvals are asked for while the page is visible. */
const WAITING_POLL_MS = 2_000;

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

function Upstreams({ upstreams }: { upstreams: readonly Upstream[] }) {
  if (upstreams.length === 0) return <p>No upstreams registered.</p>;
  return (
    <div class="table-wrap">
      <table data-testid="upstream-table">
        <caption class="visually-hidden">MCP upstreams, newest first, with their health</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">URL</th>
            <th scope="col">Health</th>
            <th scope="col">Tools</th>
            <th scope="col">Last checked</th>
          </tr>
        </thead>
        <tbody>
          {upstreams.map((upstream) => {
            const { health } = upstream;
            return (
              <tr key={upstream.id}>
                <td>
                  {upstream.name} <span class="mono muted">{upstream.slug}</span>
                </td>
                <td class="mono">{upstream.url}</td>
                <td>
                  <span class={health.status === 'error' ? 'status status-revoked' : 'status'}>{health.status}</span>
                  {health.latencyMs === null ? null : <span class="muted"> {count(health.latencyMs)} ms</span>}
                  {health.error ? <p class="hint">{health.error}</p> : null}
                </td>
                <td>{count(health.toolCount)}</td>
                <td>
                  <Time iso={health.checkedAt} />
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

/** Each tool with its switch: the change is the API's PATCH, and the row shows what it answered. */
function Tools({ tools, onChanged }: { tools: readonly Tool[]; onChanged: (tool: Tool) => void }) {
  const write = may(session.value!, 'mcp.write');
  const [failures, setFailures] = useState<Readonly<Record<string, string>>>({});
  // The switch being changed: it shows the asked-for state until the API answers.
  const [busy, setBusy] = useState<{ id: string; enabled: boolean } | null>(null);
  const toggle = async (tool: Tool, enabled: boolean) => {
    setBusy({ id: tool.id, enabled });
    try {
      onChanged(unwrap(await api.PATCH('/mcp/tools/{id}', { params: { path: { id: tool.id } }, body: { enabled } })));
      setFailures(({ [tool.id]: _, ...rest }) => rest);
    } catch (error) {
      setFailures((shown) => ({ ...shown, [tool.id]: messageOf(error) }));
    } finally {
      setBusy(null);
    }
  };
  if (tools.length === 0) return <p>No tools discovered.</p>;
  return (
    <>
      {write.allowed ? null : <p class="hint">{write.reason}</p>}
      <div class="table-wrap">
        <table data-testid="tool-table">
          <caption class="visually-hidden">Tools the upstreams list, with their switches and approval policies</caption>
          <thead>
            <tr>
              <th scope="col">Name at the gateway</th>
              <th scope="col">Description</th>
              <th scope="col">Approval</th>
              <th scope="col">Switched on</th>
            </tr>
          </thead>
          <tbody>
            {tools.map((tool) => (
              <tr key={tool.id} data-tool-id={tool.id}>
                <td class="mono">{tool.gatewayName}</td>
                <td>{tool.description ?? '—'}</td>
                <td>
                  {tool.approval}
                  {tool.destructive ? <span class="muted"> (destructive)</span> : null}
                </td>
                <td>
                  <label class="check">
                    <input
                      type="checkbox"
                      checked={busy?.id === tool.id ? busy.enabled : tool.enabled}
                      disabled={!write.allowed || busy !== null}
                      aria-describedby={failures[tool.id] ? `tool-${tool.id}-error` : undefined}
                      onChange={(event) => void toggle(tool, event.currentTarget.checked)}
                    />
                    <span class="visually-hidden">{tool.gatewayName} </span>
                    {tool.enabled ? 'on' : 'off'}
                  </label>
                  {failures[tool.id] ? (
                    <p class="error" id={`tool-${tool.id}-error`} role="alert">
                      {failures[tool.id]}
                    </p>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/**
 * The calls waiting for a person, oldest first, refreshed every 2 s while the page is visible.
 * Approve and deny are an owner's or admin's; anyone else sees them disabled with the reason.
 */
function WaitingApprovals() {
  const decide = may(session.value!, 'mcp.decide');
  const [queue, setQueue] = useState<Waiting | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const refresh = async () => {
    try {
      setQueue(unwrap(await api.GET('/mcp/approvals/waiting', { params: { query: { limit: 100 } } })));
    } catch (error) {
      setFailure(messageOf(error));
    }
  };
  useVisiblePolling(refresh, WAITING_POLL_MS);
  const act = async (id: string, verb: 'approve' | 'deny', what: string) => {
    setBusy(id);
    try {
      const path = verb === 'approve' ? '/mcp/approvals/{id}/approve' : '/mcp/approvals/{id}/deny';
      const decided = unwrap(await api.POST(path, { params: { path: { id } }, body: {} }));
      setFailure(null);
      setNotice(`${what}: ${decided.tool.gatewayName} is ${decided.status}`);
      await refresh();
    } catch (error) {
      setFailure(messageOf(error));
    } finally {
      setBusy(null);
    }
  };
  return (
    <>
      <h2 id="waiting-title">Approvals waiting</h2>
      {decide.allowed ? null : (
        <p class="hint" id="decide-reason">
          {decide.reason}
        </p>
      )}
      {notice ? <p role="status">{notice}</p> : null}
      <FormError message={failure} />
      {queue === null ? (
        failure ? null : (
          <Loading what="approvals" />
        )
      ) : queue.data.length === 0 ? (
        <p data-testid="no-waiting">No tool call is waiting.</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="waiting-table" aria-labelledby="waiting-title">
            <thead>
              <tr>
                <th scope="col">Tool</th>
                <th scope="col">Upstream</th>
                <th scope="col">Key</th>
                <th scope="col">Asked</th>
                <th scope="col">Lapses</th>
                <th scope="col">Decision</th>
              </tr>
            </thead>
            <tbody>
              {queue.data.map((approval) => (
                <tr key={approval.id} data-approval-id={approval.id}>
                  <td class="mono">{approval.tool.gatewayName}</td>
                  <td>{approval.upstream.name}</td>
                  <td>{approval.key.name ?? <span class="muted">deleted key</span>}</td>
                  <td>
                    <Time iso={approval.requestedAt} />
                  </td>
                  <td>
                    <Time iso={approval.expiresAt} />
                  </td>
                  <td>
                    <div class="actions">
                      <button
                        type="button"
                        disabled={!decide.allowed || busy !== null}
                        aria-describedby={decide.allowed ? undefined : 'decide-reason'}
                        aria-label={`Approve ${approval.tool.gatewayName}`}
                        onClick={() => void act(approval.id, 'approve', 'Approved')}
                      >
                        Approve
                      </button>
                      <button
                        type="button"
                        class="danger"
                        disabled={!decide.allowed || busy !== null}
                        aria-describedby={decide.allowed ? undefined : 'decide-reason'}
                        aria-label={`Deny ${approval.tool.gatewayName}`}
                        onClick={() => void act(approval.id, 'deny', 'Denied')}
                      >
                        Deny
                      </button>
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          {queue.hasMore ? <p class="hint">More calls wait than shown: decide these first.</p> : null}
        </div>
      )}
    </>
  );
}

/** The tool gateway: approvals waiting, upstreams and their health, tools and their switches, groups and grants. */
export function ToolGatewayPage() {
  const [upstreams, setUpstreams] = useState<readonly Upstream[] | null>(null);
  const [tools, setTools] = useState<readonly Tool[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    // unwrap throws the envelope of a refusal: caught here, so it shows as the page's failure.
    const load = async () => {
      const [upstreamList, toolList] = await Promise.all([api.GET('/mcp/upstreams', { params: { query: { limit: 200 } } }), api.GET('/mcp/tools', { params: { query: { limit: 200 } } })]);
      setUpstreams(unwrap(upstreamList).data);
      setTools(unwrap(toolList).data);
    };
    load().catch((error: unknown) => setFailure(messageOf(error)));
  }, []);
  const replace = (changed: Tool) => setTools((shown) => shown?.map((tool) => (tool.id === changed.id ? changed : tool)) ?? null);
  return (
    <section>
      <h1>Tool gateway</h1>
      <WaitingApprovals />
      {failure ? <p role="alert">{failure}</p> : null}
      <h2>Upstreams</h2>
      {upstreams === null ? failure ? null : <Loading what="upstreams" /> : <Upstreams upstreams={upstreams} />}
      <h2>Tools</h2>
      {tools === null ? failure ? null : <Loading what="tools" /> : <Tools tools={tools} onChanged={replace} />}
      {tools === null ? null : <GroupsAndGrants tools={tools} />}
    </section>
  );
}
