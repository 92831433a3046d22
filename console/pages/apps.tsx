import { useEffect, useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { api } from '../api/client.ts';
import { type FormErrors, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { may } from '../permissions.ts';
import { describedBy, Field, FormError, Loading, TableRegion, Time } from '../ui.tsx';
import { BuildDecisionView } from './build-decision.tsx';

type App = components['schemas']['App'];
type Repository = components['schemas']['GitRepositoryList']['data'][number];
type Branch = components['schemas']['GitBranchList']['data'][number];
type Decision = components['schemas']['BuildDecisionView'];

const DEPLOY_FIELDS = ['repo', 'name', 'branch', 'rootDir', 'startCommand'] as const;

/** What the deploy form sends: the fields left empty are the repository's own defaults. */
interface DeployChoice {
  repo: string;
  branch: string;
  rootDir: string;
  startCommand: string;
}

function checkQuery(choice: DeployChoice) {
  return {
    repo: choice.repo,
    ...(choice.branch ? { branch: choice.branch } : {}),
    ...(choice.rootDir ? { rootDir: choice.rootDir } : {}),
    ...(choice.startCommand ? { startCommand: choice.startCommand } : {}),
  };
}

/**
 * Deploy a repository of the git host: pick it and its branch, then "Check" asks the build-check
 * what a deploy would decide (or the 400 it would get: a monorepo's candidate folders, an unfinished
 * start command) and which variables the example env file asks for; "Deploy" creates the app.
 */
function DeployForm({ onDeployed }: { onDeployed: (appId: string) => void }) {
  const deploy = may(session.value!, 'apps.deploy');
  const [repos, setRepos] = useState<readonly Repository[] | null>(null);
  const [branches, setBranches] = useState<readonly Branch[]>([]);
  const [choice, setChoice] = useState<DeployChoice>({ repo: '', branch: '', rootDir: '', startCommand: '' });
  const [decision, setDecision] = useState<Decision | null>(null);
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    api
      .GET('/githost/repos')
      .then((result) => {
        const listed = unwrap(result).data;
        setRepos(listed);
        const first = listed.find((repo) => !repo.empty);
        if (first) setChoice((current) => ({ ...current, repo: first.name }));
      })
      .catch((error: unknown) => setErrors(formErrorsOf(error, [])));
  }, []);
  useEffect(() => {
    setBranches([]);
    if (!choice.repo) return;
    api
      .GET('/githost/branches', { params: { query: { repo: choice.repo } } })
      .then((result) => setBranches(unwrap(result).data))
      .catch(() => setBranches([]));
  }, [choice.repo]);
  /** Any change of what would be deployed makes the last check stale. */
  const choose = (field: keyof DeployChoice, value: string) => {
    setChoice((current) => ({ ...current, [field]: value, ...(field === 'repo' ? { branch: '' } : {}) }));
    setDecision(null);
  };
  const check = async () => {
    setBusy(true);
    try {
      setDecision(unwrap(await api.GET('/githost/build-check', { params: { query: checkQuery(choice) } })));
      setErrors(NO_ERRORS);
    } catch (error) {
      setDecision(null);
      setErrors(formErrorsOf(error, DEPLOY_FIELDS));
    } finally {
      setBusy(false);
    }
  };
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const name = String(new FormData(event.currentTarget as HTMLFormElement).get('name') ?? '');
    setBusy(true);
    try {
      const body = { ...checkQuery(choice), ...(name ? { name } : {}) };
      const accepted = unwrap(await api.POST('/apps/githost', { body }));
      setErrors(NO_ERRORS);
      onDeployed(accepted.app.id);
    } catch (error) {
      setErrors(formErrorsOf(error, DEPLOY_FIELDS));
    } finally {
      setBusy(false);
    }
  };
  if (repos === null) return errors.form ? <FormError message={errors.form} /> : <Loading what="repositories" />;
  const pushed = repos.filter((repo) => !repo.empty);
  const reason = deploy.allowed ? (pushed.length === 0 ? 'Push to a repository of the git host first' : null) : deploy.reason;
  return (
    <form class="card" aria-labelledby="deploy-title" noValidate onSubmit={(event) => void submit(event)}>
      <h2 id="deploy-title">Deploy from the git host</h2>
      {reason ? <p class="hint">{reason}</p> : null}
      <fieldset disabled={reason !== null || busy}>
        <FormError message={errors.form} />
        <Field id="deploy-repo" label="Repository" error={errors.fields.repo}>
          <select
            id="deploy-repo"
            value={choice.repo}
            onChange={(event) => choose('repo', event.currentTarget.value)}
            aria-describedby={describedBy('deploy-repo', null, errors.fields.repo)}
          >
            {pushed.map((repo) => (
              <option key={repo.name} value={repo.name}>
                {repo.name}
              </option>
            ))}
          </select>
        </Field>
        <Field id="deploy-branch" label="Branch" error={errors.fields.branch} hint="Deployed now and again on every push to it">
          <select
            id="deploy-branch"
            value={choice.branch}
            onChange={(event) => choose('branch', event.currentTarget.value)}
            aria-describedby={describedBy('deploy-branch', 'hint', errors.fields.branch)}
          >
            <option value="">The repository’s default branch</option>
            {branches.map((branch) => (
              <option key={branch.name} value={branch.name}>
                {branch.name}
              </option>
            ))}
          </select>
        </Field>
        <Field id="deploy-root" label="App folder (optional)" error={errors.fields.rootDir} hint="For a repository holding several apps">
          <input
            id="deploy-root"
            value={choice.rootDir}
            onInput={(event) => choose('rootDir', event.currentTarget.value)}
            aria-describedby={describedBy('deploy-root', 'hint', errors.fields.rootDir)}
          />
        </Field>
        <Field id="deploy-start" label="Start command (optional)" error={errors.fields.startCommand} hint="One line; only when it cannot be read from the repository">
          <input
            id="deploy-start"
            class="mono"
            value={choice.startCommand}
            maxLength={300}
            onInput={(event) => choose('startCommand', event.currentTarget.value)}
            aria-describedby={describedBy('deploy-start', 'hint', errors.fields.startCommand)}
          />
        </Field>
        <Field id="deploy-name" label="App name (optional)" error={errors.fields.name} hint="Its address; the repository’s name when empty">
          <input id="deploy-name" name="name" maxLength={40} aria-describedby={describedBy('deploy-name', 'hint', errors.fields.name)} />
        </Field>
        <div class="actions">
          <button type="button" onClick={() => void check()}>
            Check
          </button>
          <button type="submit">Deploy</button>
        </div>
      </fieldset>
      {decision ? <BuildDecisionView answer={decision} /> : null}
    </form>
  );
}

/** Apps deployed from git: each with its status and the address it answers at. */
export function AppsPage() {
  const { route } = useLocation();
  const [apps, setApps] = useState<readonly App[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    api
      .GET('/apps')
      .then((result) => setApps(unwrap(result).data))
      .catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  }, []);
  return (
    <section>
      <h1>Apps</h1>
      {failure ? <p role="alert">{failure}</p> : null}
      {apps === null ? (
        failure ? null : (
          <Loading what="apps" />
        )
      ) : apps.length === 0 ? (
        <p>No apps yet.</p>
      ) : (
        <TableRegion label="Apps">
          <table data-testid="app-table">
            <caption class="visually-hidden">Apps, newest first</caption>
            <thead>
              <tr>
                <th scope="col">App</th>
                <th scope="col">Status</th>
                <th scope="col">Address</th>
                <th scope="col">Source</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {apps.map((app) => (
                <tr key={app.id} data-app-id={app.id}>
                  <td>
                    <a href={`/console/apps/${app.id}`}>{app.name}</a>
                  </td>
                  <td>
                    <span class={`status status-${app.status}`}>{app.status}</span>
                  </td>
                  <td>
                    <a href={app.url} rel="noreferrer" target="_blank" class="mono">
                      {app.url}
                    </a>
                  </td>
                  <td class="mono">
                    {app.source.repo ?? '—'}@{app.source.branch}
                    {app.source.rootDir ? `/${app.source.rootDir}` : ''}
                  </td>
                  <td>
                    <Time iso={app.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
      <DeployForm onDeployed={(appId) => route(`/console/apps/${appId}`)} />
    </section>
  );
}
