import { useEffect, useState } from 'preact/hooks';
import { useLocation, useRoute } from 'preact-iso';
import { api } from '../api/client.ts';
import { unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { count } from '../format.ts';
import { served } from '../layout.tsx';
import { may } from '../permissions.ts';
import { FormError, Loading, TableRegion, Time } from '../ui.tsx';
import { useVisiblePolling } from '../visible-polling.ts';
import { EnvSection } from './app-env.tsx';
import { BuildDecisionView } from './build-decision.tsx';

type App = components['schemas']['App'];
type Deployment = components['schemas']['Deployment'];
type BuildLog = components['schemas']['BuildLog'];
type LogLine = components['schemas']['ServiceLogLines']['data'][number];
type Decision = components['schemas']['BuildDecisionView'];

/** A deployment still on its way: the page keeps asking until it is done. */
const UNDER_WAY = new Set<Deployment['status']>(['queued', 'cloning', 'building', 'starting']);
/** A rollback reruns a finished build: one that went live once and whose artifact the history keeps. */
const ROLLBACK_FROM = new Set<Deployment['status']>(['live', 'retired']);

function milliseconds(value: number | null): string {
  return value === null ? '—' : value < 1000 ? `${value} ms` : `${(value / 1000).toFixed(1)} s`;
}

function bytes(value: number | null): string {
  if (value === null) return '—';
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${count(Math.round(value / 1024))} KB`;
  return `${(value / 1024 / 1024).toFixed(1)} MB`;
}

/** A deployment's build log, asked for again while the deployment runs. */
function BuildLogSection({ deployment }: { deployment: Deployment }) {
  const [log, setLog] = useState<BuildLog | null>(null);
  useVisiblePolling(async () => {
    if (log?.complete) return;
    setLog(unwrap(await api.GET('/deployments/{id}/logs', { params: { path: { id: deployment.id } } })));
  }, 2_000);
  return (
    <section aria-labelledby="build-log-title">
      <h2 id="build-log-title">Build log of {deployment.id.slice(0, 8)}</h2>
      {log === null ? (
        <Loading what="the build log" />
      ) : (
        <>
          {log.complete ? null : <p role="status">The deployment is running; the log is shown when it ends.</p>}
          <pre class="body" data-testid="build-log">
            {log.lines.length === 0 ? 'Nothing logged.' : log.lines.join('\n')}
          </pre>
        </>
      )}
    </section>
  );
}

/** What the running app printed, every instance, asked for again every few seconds. */
function RuntimeLogSection({ serviceId }: { serviceId: string }) {
  const [lines, setLines] = useState<readonly LogLine[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useVisiblePolling(async () => {
    try {
      setLines(unwrap(await api.GET('/services/{id}/logs', { params: { path: { id: serviceId } } })).data);
      setFailure(null);
    } catch (error) {
      setFailure(error instanceof Error ? error.message : String(error));
    }
  }, 5_000);
  return (
    <section aria-labelledby="runtime-log-title">
      <h2 id="runtime-log-title">What the app printed</h2>
      <FormError message={failure} />
      {lines === null ? (
        failure ? null : (
          <Loading what="the app's log" />
        )
      ) : (
        <pre class="body" data-testid="runtime-log">
          {lines.length === 0 ? 'Nothing printed yet.' : lines.map((line) => `${line.at} ${line.stream} ${line.line}`).join('\n')}
        </pre>
      )}
    </section>
  );
}

/**
 * One app: where it answers, its web service's state with stop and start, its last 20 deployments
 * with the time each phase took and a rollback to any that went live, the build log of the one
 * chosen (the latest by default), how it is built and why, and what it printed.
 */
export function AppDetailPage() {
  const { params } = useRoute();
  const { route } = useLocation();
  const id = params.id ?? '';
  const deploy = may(session.value!, 'apps.deploy');
  const [app, setApp] = useState<App | null>(null);
  const [history, setHistory] = useState<readonly Deployment[]>([]);
  const [decision, setDecision] = useState<Decision | null>(null);
  const [shown, setShown] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const service = app?.services[0];
  const reload = async () => {
    const current = unwrap(await api.GET('/apps/{id}', { params: { path: { id } } }));
    setApp(current);
    const web = current.services[0];
    if (!web) return;
    const [deployments, build] = await Promise.all([
      api.GET('/services/{id}/deployments', { params: { path: { id: web.id } } }),
      api.GET('/services/{id}/build', { params: { path: { id: web.id } } }),
    ]);
    setHistory(unwrap(deployments).data);
    setDecision(unwrap(build));
  };
  // While a deployment is under way its status and timings change: every two seconds, else every ten.
  const underWay = history.some((deployment) => UNDER_WAY.has(deployment.status));
  useVisiblePolling(
    async () => {
      try {
        await reload();
      } catch (error) {
        setFailure(error instanceof Error ? error.message : String(error));
      }
    },
    underWay ? 2_000 : 10_000,
  );
  useEffect(() => setShown(null), [id]);
  const act = async (what: string, run: () => Promise<unknown>) => {
    try {
      await run();
      setFailure(null);
      setNotice(what);
      await reload();
    } catch (error) {
      setFailure(error instanceof Error ? error.message : String(error));
    }
  };
  if (app === null) return failure ? <p role="alert">{failure}</p> : <Loading what="the app" />;
  const logged = history.find((deployment) => deployment.id === shown) ?? history[0];
  const serviceId = service?.id ?? '';
  const withService = { params: { path: { id: serviceId } } };
  const envServed = served.value.has('GET /services/{id}/env');
  return (
    <section>
      <h1>{app.name}</h1>
      {notice ? (
        <p role="status" data-testid="app-notice">
          {notice}
        </p>
      ) : null}
      <FormError message={failure} />
      <dl class="details" data-testid="app-details">
        <dt>Address</dt>
        <dd>
          <a href={app.url} rel="noreferrer" target="_blank" class="mono">
            {app.url}
          </a>
        </dd>
        <dt>Status</dt>
        <dd>
          <span class={`status status-${app.status}`}>{app.status}</span>
        </dd>
        <dt>Service</dt>
        <dd data-testid="service-state">{service?.state ?? 'none'}</dd>
        <dt>Source</dt>
        <dd class="mono">
          {app.source.repo ?? '—'}@{app.source.branch}
          {app.source.rootDir ? `/${app.source.rootDir}` : ''}
        </dd>
        <dt>Deploys on push</dt>
        <dd>{app.deployOnPush ? 'yes' : 'no'}</dd>
      </dl>
      {deploy.allowed ? null : <p class="hint">{deploy.reason}</p>}
      <div class="actions">
        <button
          type="button"
          disabled={!deploy.allowed || service === undefined || service.state === 'stopped'}
          onClick={() => void act('Stopped: the address answers 503 until started', async () => unwrap(await api.POST('/services/{id}/stop', withService)))}
        >
          Stop
        </button>
        <button
          type="button"
          disabled={!deploy.allowed || service === undefined || service.state !== 'stopped'}
          onClick={() => void act('Started', async () => unwrap(await api.POST('/services/{id}/start', withService)))}
        >
          Start
        </button>
        <button
          type="button"
          class="danger"
          disabled={!deploy.allowed}
          onClick={() =>
            confirm(`Delete the app “${app.name}”? Its address stops answering; its repository stays.`) &&
            void act('Deleted', async () => {
              unwrap(await api.DELETE('/apps/{id}', { params: { path: { id: app.id } } }));
              route('/console/apps');
            })
          }
        >
          Delete app
        </button>
      </div>

      <h2>Deployments</h2>
      {history.length === 0 ? (
        <p>No deployment yet.</p>
      ) : (
        <TableRegion label="Deployments">
          <table data-testid="deployment-table">
            <caption class="visually-hidden">The last 20 deployments, newest first, with the time of each phase</caption>
            <thead>
              <tr>
                <th scope="col">Started</th>
                <th scope="col">Status</th>
                <th scope="col">Why</th>
                <th scope="col">Commit</th>
                <th scope="col">Clone</th>
                <th scope="col">Build</th>
                <th scope="col">Start</th>
                <th scope="col">Size</th>
                <th scope="col">Act</th>
              </tr>
            </thead>
            <tbody>
              {history.map((deployment) => (
                <tr key={deployment.id} data-deployment-id={deployment.id}>
                  <td>
                    <Time iso={deployment.createdAt} />
                  </td>
                  <td>
                    <span class={`status status-${deployment.status}`}>{deployment.status}</span>
                    {deployment.failureReason ? <p class="hint">{deployment.failureReason}</p> : null}
                  </td>
                  <td>{deployment.reason}</td>
                  <td class="mono">{deployment.commit?.slice(0, 8) ?? '—'}</td>
                  <td>{milliseconds(deployment.timings?.clone ?? null)}</td>
                  <td>{milliseconds(deployment.timings?.build ?? null)}</td>
                  <td>{milliseconds(deployment.timings?.deploy ?? null)}</td>
                  <td>{bytes(deployment.imageSizeBytes)}</td>
                  <td>
                    <div class="actions">
                      <button type="button" aria-label={`Build log of ${deployment.id.slice(0, 8)}`} onClick={() => setShown(deployment.id)}>
                        Log
                      </button>
                      {ROLLBACK_FROM.has(deployment.status) && deployment.id !== service?.liveDeploymentId ? (
                        <button
                          type="button"
                          disabled={!deploy.allowed}
                          aria-label={`Roll back to ${deployment.id.slice(0, 8)}`}
                          onClick={() =>
                            void act(`Rolling back to ${deployment.id.slice(0, 8)}`, async () =>
                              unwrap(await api.POST('/services/{id}/rollback', { ...withService, body: { deploymentId: deployment.id } })),
                            )
                          }
                        >
                          Roll back
                        </button>
                      ) : null}
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
      {logged ? <BuildLogSection key={`${logged.id}:${logged.status}`} deployment={logged} /> : null}
      {decision ? <BuildDecisionView answer={decision} /> : null}
      {service && envServed ? <EnvSection key={service.id} serviceId={service.id} state={service.state} /> : null}
      {service ? <RuntimeLogSection serviceId={service.id} /> : null}
    </section>
  );
}
