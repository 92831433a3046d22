import { useEffect, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import { unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { may } from '../permissions.ts';
import { Loading, Time } from '../ui.tsx';

type Connection = components['schemas']['ConnectorConnection'];

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/**
 * Connectors signed in over OAuth (`GET /oauth/connections`) with Revoke: owners and admins see and
 * end everyone's, members their own (the API lists a member only theirs).
 */
export function ConnectionsList() {
  const caller = session.value!;
  const others = may(caller, 'connections.revokeOthers');
  const [connections, setConnections] = useState<readonly Connection[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = () =>
    api
      .GET('/oauth/connections', { params: { query: { limit: 200 } } })
      .then((result) => {
        setConnections(unwrap(result).data);
        setFailure(null);
      })
      .catch((error: unknown) => setFailure(messageOf(error)));
  useEffect(() => void load(), []);
  const revoke = async (connection: Connection) => {
    const name = connection.client.name ?? connection.client.id;
    if (!confirm(`Revoke ${name}? Its next call is refused; it must sign in again.`)) return;
    try {
      unwrap(await api.DELETE('/oauth/connections/{id}', { params: { path: { id: connection.id } } }));
      setNotice(`Revoked: ${name}`);
      await load();
    } catch (error) {
      setFailure(messageOf(error));
    }
  };
  return (
    <div class="card">
      <h3 id="connections-title">Connected clients</h3>
      {others.allowed ? null : (
        <p class="hint" id="connections-reason">
          {others.reason}
        </p>
      )}
      {failure ? <p role="alert">{failure}</p> : null}
      {notice ? <p role="status">{notice}</p> : null}
      {connections === null ? (
        failure ? null : (
          <Loading what="connected clients" />
        )
      ) : connections.length === 0 ? (
        <p>No connector is signed in.</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="connection-table" aria-labelledby="connections-title">
            <thead>
              <tr>
                <th scope="col">Client</th>
                <th scope="col">Sends people back to</th>
                <th scope="col">Signed in by</th>
                <th scope="col">Scopes</th>
                <th scope="col">Connected</th>
                <th scope="col">Expires</th>
                <th scope="col">Revoke</th>
              </tr>
            </thead>
            <tbody>
              {connections.map((connection) => {
                const allowed = connection.person.id === caller.personId || others.allowed;
                const name = connection.client.name ?? connection.client.id;
                return (
                  <tr key={connection.id} data-connection-id={connection.id}>
                    <td>
                      {name} <span class="muted mono">{connection.client.id}</span>
                    </td>
                    <td class="mono">{connection.client.redirectHosts.join(', ')}</td>
                    <td>{connection.person.email}</td>
                    <td class="mono">{connection.scopes.join(' ')}</td>
                    <td>
                      <Time iso={connection.createdAt} />
                    </td>
                    <td>
                      <Time iso={connection.expiresAt} />
                    </td>
                    <td class="actions">
                      <button
                        type="button"
                        class="danger"
                        disabled={!allowed}
                        aria-describedby={allowed ? undefined : 'connections-reason'}
                        aria-label={`Revoke ${name}`}
                        onClick={() => void revoke(connection)}
                      >
                        Revoke
                      </button>
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
