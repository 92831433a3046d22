import { useEffect, useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { api } from '../api/client.ts';
import { type FormErrors, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components, operations } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { usd } from '../format.ts';
import { may } from '../permissions.ts';
import { useProjects } from '../projects.ts';
import { describedBy, Field, FormError, Loading, ShownOnceDialog, Time } from '../ui.tsx';
import { SCOPES as ALL_SCOPES } from '../../core/identity/scopes.ts';

type Key = components['schemas']['Key'];
type KeyDetail = components['schemas']['KeyDetail'];
type Scope = Key['scopes'][number];
type CreateBody = operations['keys.create']['requestBody']['content']['application/json'];

// The spec's list, from the one the service itself checks against; typed by the API's own schema.
const SCOPES: readonly Scope[] = ALL_SCOPES;

/** Empty inputs are absent fields; numbers as numbers, so the API's own validation speaks. */
function optionalNumber(value: FormDataEntryValue | null): number | undefined {
  return value === null || value === '' ? undefined : Number(value);
}

/** The owner-only part of a key's settings: spend cap, expiry, rate limits. */
function LimitFields({ errors, current }: { errors: FormErrors; current?: Key }) {
  const verdict = may(session.value!, 'keys.limits');
  const reason = verdict.allowed ? null : verdict.reason;
  const cap = current?.spendCap ?? null;
  return (
    <fieldset disabled={!verdict.allowed} aria-describedby={reason ? 'limits-reason' : undefined}>
      <legend>Limits (owner only)</legend>
      {reason ? (
        <p class="hint" id="limits-reason">
          {reason}
        </p>
      ) : null}
      <Field id="cap-usd" label="Spend cap (USD)" error={errors.fields.spendCap}>
        <input
          id="cap-usd"
          name="capUsd"
          type="number"
          min="0"
          step="0.01"
          defaultValue={cap ? String(cap.usd) : ''}
          aria-describedby={describedBy('cap-usd', null, errors.fields.spendCap)}
        />
      </Field>
      <Field id="cap-period" label="Cap period">
        {/* The option's `selected` sets the first choice: Preact gives a select's defaultValue to it as an attribute, which selects nothing. */}
        <select id="cap-period" name="capPeriod">
          {(['day', 'week', 'month', 'total'] as const).map((period) => (
            <option key={period} value={period} selected={period === (cap?.period ?? 'month')}>
              {period}
            </option>
          ))}
        </select>
      </Field>
      <Field id="cap-mode" label="At the cap">
        <select id="cap-mode" name="capMode">
          <option value="blocking" selected={(cap?.mode ?? 'blocking') === 'blocking'}>
            block calls
          </option>
          <option value="alert" selected={cap?.mode === 'alert'}>
            alert only
          </option>
        </select>
      </Field>
      <Field id="expires" label="Expires (your time zone)" error={errors.fields.expiresAt}>
        <input id="expires" name="expiresAt" type="datetime-local" aria-describedby={describedBy('expires', null, errors.fields.expiresAt)} />
      </Field>
      <Field id="rpm" label="Requests per minute" error={errors.fields.rateLimits}>
        <input id="rpm" name="requestsPerMinute" type="number" min="1" step="1" defaultValue={current?.rateLimits.requestsPerMinute?.toString() ?? ''} />
      </Field>
      <Field id="tpm" label="Tokens per minute">
        <input id="tpm" name="tokensPerMinute" type="number" min="1" step="1" defaultValue={current?.rateLimits.tokensPerMinute?.toString() ?? ''} />
      </Field>
      <Field id="concurrency" label="Concurrent calls">
        <input id="concurrency" name="concurrency" type="number" min="1" step="1" defaultValue={current?.rateLimits.concurrency?.toString() ?? ''} />
      </Field>
    </fieldset>
  );
}

/** The limit fields of a form as the API takes them; only what was filled in is sent. */
function limitsOf(form: FormData): Pick<CreateBody, 'spendCap' | 'expiresAt' | 'rateLimits'> {
  const out: Pick<CreateBody, 'spendCap' | 'expiresAt' | 'rateLimits'> = {};
  const capUsd = optionalNumber(form.get('capUsd'));
  if (capUsd !== undefined) out.spendCap = { usd: capUsd, period: form.get('capPeriod') as 'month', mode: form.get('capMode') as 'blocking' };
  const expires = String(form.get('expiresAt') ?? '');
  if (expires !== '') out.expiresAt = new Date(expires).toISOString();
  const rateLimits = {
    requestsPerMinute: optionalNumber(form.get('requestsPerMinute')),
    tokensPerMinute: optionalNumber(form.get('tokensPerMinute')),
    concurrency: optionalNumber(form.get('concurrency')),
  };
  if (Object.values(rateLimits).some((value) => value !== undefined)) out.rateLimits = rateLimits;
  return out;
}

function CreateKeyForm({ onCreated }: { onCreated: (created: { name: string; key: string }) => void }) {
  const verdict = may(session.value!, 'keys.write');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    const form = new FormData(element);
    const body: CreateBody = { name: String(form.get('name')), scopes: form.getAll('scopes') as Scope[], ...limitsOf(form) };
    setBusy(true);
    try {
      const created = unwrap(await api.POST('/keys', { body }));
      element.reset();
      setErrors(NO_ERRORS);
      onCreated({ name: created.name, key: created.key });
    } catch (error) {
      setErrors(formErrorsOf(error, ['name', 'scopes', 'spendCap', 'expiresAt', 'rateLimits']));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={(event) => void submit(event)} noValidate aria-labelledby="create-title">
      <h2 id="create-title">Create a key</h2>
      {verdict.allowed ? null : <p class="hint">{verdict.reason}</p>}
      <fieldset disabled={!verdict.allowed || busy}>
        <FormError message={errors.form} />
        <Field id="key-name" label="Name" error={errors.fields.name}>
          <input id="key-name" name="name" required maxLength={100} aria-describedby={describedBy('key-name', null, errors.fields.name)} />
        </Field>
        <fieldset aria-describedby={errors.fields.scopes ? 'scopes-error' : undefined}>
          <legend>Scopes</legend>
          <div class="checks">
            {SCOPES.map((scope) => (
              <label key={scope} class="check">
                <input type="checkbox" name="scopes" value={scope} defaultChecked={scope === 'inference'} /> {scope}
              </label>
            ))}
          </div>
          {errors.fields.scopes ? (
            <p class="error" id="scopes-error" role="alert">
              {errors.fields.scopes}
            </p>
          ) : null}
        </fieldset>
        <LimitFields errors={errors} />
        <button type="submit">Create key</button>
      </fieldset>
    </form>
  );
}

export function KeysPage() {
  const [keys, setKeys] = useState<readonly Key[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null);
  const projects = useProjects();
  const load = () =>
    api
      .GET('/keys', { params: { query: { limit: 200 } } })
      .then((result) => setKeys(unwrap(result).data))
      .catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  useEffect(() => void load(), []);
  return (
    <section>
      <h1>Keys</h1>
      {failure ? <p role="alert">{failure}</p> : null}
      {keys === null ? (
        failure ? null : (
          <Loading what="keys" />
        )
      ) : keys.length === 0 ? (
        <p>No keys yet.</p>
      ) : (
        <div class="table-wrap">
          <table>
            <caption class="visually-hidden">API keys, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Scopes</th>
                <th scope="col">Project</th>
                <th scope="col">Last used</th>
              </tr>
            </thead>
            <tbody>
              {keys.map((key) => (
                <tr key={key.id}>
                  <td>
                    <a href={`/console/keys/${key.id}`}>{key.name}</a> <span class="mono muted">{key.hint}</span>
                  </td>
                  <td>
                    <span class={`status status-${key.status}`}>{key.status}</span>
                  </td>
                  <td>{key.scopes.join(', ')}</td>
                  <td>{projects.get(key.projectId) ?? key.projectId}</td>
                  <td>
                    <Time iso={key.lastUsedAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <CreateKeyForm
        onCreated={(made) => {
          setCreated(made);
          void load();
        }}
      />
      {created ? <ShownOnceDialog title={`Key “${created.name}” created`} label="API key" secret={created.key} onClose={() => setCreated(null)} /> : null}
    </section>
  );
}

type Patch = operations['keys.update']['requestBody']['content']['application/json'];

/** Where the key stands against its cap, as `GET /keys/{id}` reports it (spend in the cap's own period). */
function BudgetState({ budget }: { budget: KeyDetail['budget'] }) {
  if (budget.state === 'uncapped') return <p data-testid="budget-state">No spend cap: the key spends until the organisation's balance or a project cap stops it.</p>;
  return (
    <dl class="figures" data-testid="budget-state">
      <div class="figure">
        <dt>State</dt>
        <dd>
          <span class={`status status-${budget.state}`}>{budget.state}</span>
        </dd>
      </div>
      <div class="figure">
        <dt>Cap per {budget.period}</dt>
        <dd>
          {usd(budget.capUsd ?? 0)} <span class="muted">({budget.mode === 'blocking' ? 'blocks calls' : 'alerts only'})</span>
        </dd>
      </div>
      <div class="figure">
        <dt>Spent this {budget.period === 'total' ? 'lifetime' : budget.period}</dt>
        <dd>{usd(budget.spentUsd ?? 0)}</dd>
      </div>
      <div class="figure">
        <dt>Remaining</dt>
        <dd>{usd(budget.remainingUsd ?? 0)}</dd>
      </div>
    </dl>
  );
}

/**
 * Moving a key to another project: a person's act (the API refuses it to an API key), and never for
 * an app's key, which moves only with its app.
 */
function MoveKeyForm(props: { keyRecord: KeyDetail; projects: ReadonlyMap<string, string>; blocked: string | null; error: string | undefined; onMove: (projectId: string) => void }) {
  const { keyRecord: key, projects } = props;
  const move = may(session.value!, 'keys.move');
  const others = [...projects].filter(([projectId]) => projectId !== key.projectId);
  const reason = !move.allowed
    ? move.reason
    : (props.blocked ?? (key.appId ? 'This key belongs to an app and moves only with it: move the app instead' : others.length === 0 ? 'There is no other project you can see' : null));
  return (
    <form
      class="card"
      aria-labelledby="move-title"
      onSubmit={(event) => {
        event.preventDefault();
        props.onMove(String(new FormData(event.currentTarget).get('projectId')));
      }}
    >
      <h3 id="move-title">Move to another project</h3>
      {reason ? <p class="hint">{reason}</p> : null}
      <fieldset disabled={reason !== null}>
        <Field id="move-project" label="Project" error={props.error} hint="Its spend history stays with it; tool groups granted in its current project stop counting for it.">
          <select id="move-project" name="projectId" aria-describedby={describedBy('move-project', 'hint', props.error)}>
            {others.map(([projectId, name]) => (
              <option key={projectId} value={projectId}>
                {name}
              </option>
            ))}
          </select>
        </Field>
        <button type="submit">Move key</button>
      </fieldset>
    </form>
  );
}

export function KeyDetailPage() {
  const { params } = useRoute();
  const id = params.id ?? '';
  const [key, setKey] = useState<KeyDetail | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [notice, setNotice] = useState<string | null>(null);
  const load = () =>
    api
      .GET('/keys/{id}', { params: { path: { id } } })
      .then((result) => setKey(unwrap(result)))
      .catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  useEffect(() => void load(), [id]);
  const projects = useProjects();
  const write = may(session.value!, 'keys.write');

  const act = async (what: string, run: () => Promise<unknown>, fields: readonly string[] = []) => {
    try {
      await run();
      // The notice follows the reloaded key, so what it says and what the page shows agree.
      await load();
      setErrors(NO_ERRORS);
      setNotice(what);
    } catch (error) {
      setErrors(formErrorsOf(error, fields));
    }
  };
  const patch = (what: string, body: Patch, fields: readonly string[]) => act(what, async () => unwrap(await api.PATCH('/keys/{id}', { params: { path: { id } }, body })), fields);
  const remove = (permanent: boolean) =>
    act(permanent ? 'Key deleted' : 'Key revoked', async () => {
      unwrap(await api.DELETE('/keys/{id}', { params: { path: { id }, query: permanent ? { permanent: 'true' } : {} } }));
      if (permanent) location.assign('/console/keys');
    });

  if (failure) return <p role="alert">{failure}</p>;
  if (key === null) return <Loading what="the key" />;
  const revoked = key.status === 'revoked';
  const reason = write.allowed ? (revoked ? 'A revoked key cannot change' : null) : write.reason;
  return (
    <section>
      <p>
        <a href="/console/keys">← Keys</a>
      </p>
      <h1>{key.name}</h1>
      <p>
        <span class={`status status-${key.status}`}>{key.status}</span> <span class="mono muted">{key.hint}</span> · project{' '}
        <span data-testid="key-project">{projects.get(key.projectId) ?? key.projectId}</span> · scopes {key.scopes.join(', ')} · created <Time iso={key.createdAt} /> · last used{' '}
        <Time iso={key.lastUsedAt} />
      </p>
      {notice ? <p role="status">{notice}</p> : null}
      <FormError message={errors.form} />
      <h2>Spend</h2>
      <dl class="figures">
        <div class="figure">
          <dt>Today (UTC)</dt>
          <dd>{usd(key.spend.todayUsd)}</dd>
        </div>
        <div class="figure">
          <dt>This week</dt>
          <dd>{usd(key.spend.weekUsd)}</dd>
        </div>
        <div class="figure">
          <dt>This month</dt>
          <dd>{usd(key.spend.monthUsd)}</dd>
        </div>
        <div class="figure">
          <dt>All time</dt>
          <dd>{usd(key.spend.totalUsd)}</dd>
        </div>
      </dl>
      <h2>Budget</h2>
      <BudgetState budget={key.budget} />

      <h2>Change</h2>
      {reason ? <p class="hint">{reason}</p> : null}
      <form
        class="card"
        onSubmit={(event) => {
          event.preventDefault();
          void patch('Key renamed', { name: String(new FormData(event.currentTarget).get('name')) }, ['name']);
        }}
      >
        <fieldset disabled={reason !== null}>
          <Field id="rename" label="Name" error={errors.fields.name}>
            <input id="rename" name="name" defaultValue={key.name} maxLength={100} aria-describedby={describedBy('rename', null, errors.fields.name)} />
          </Field>
          <button type="submit">Rename</button>
        </fieldset>
      </form>
      <form
        class="card"
        onSubmit={(event) => {
          event.preventDefault();
          const limits = limitsOf(new FormData(event.currentTarget));
          void patch('Limits saved', { spendCap: limits.spendCap ?? null, ...(limits.expiresAt ? { expiresAt: limits.expiresAt } : {}), rateLimits: limits.rateLimits ?? {} }, [
            'spendCap',
            'expiresAt',
            'rateLimits',
          ]);
        }}
      >
        <fieldset disabled={reason !== null}>
          <LimitFields errors={errors} current={key} />
          <button type="submit" disabled={!may(session.value!, 'keys.limits').allowed}>
            Save limits
          </button>
        </fieldset>
      </form>
      <MoveKeyForm
        keyRecord={key}
        projects={projects}
        blocked={reason}
        error={errors.fields.projectId}
        onMove={(projectId) => void patch(`Key moved to ${projects.get(projectId) ?? projectId}`, { projectId }, ['projectId'])}
      />
      <div class="card actions">
        <button type="button" disabled={reason !== null} onClick={() => void patch(key.disabled ? 'Key enabled' : 'Key disabled', { disabled: !key.disabled }, ['disabled'])}>
          {key.disabled ? 'Enable' : 'Disable'}
        </button>
        <button type="button" class="danger" disabled={reason !== null} onClick={() => confirm(`Revoke “${key.name}”? Calls with it stop at once.`) && void remove(false)}>
          Revoke
        </button>
        <button type="button" class="danger" disabled={!write.allowed} onClick={() => confirm(`Delete “${key.name}” permanently? Its usage history stays.`) && void remove(true)}>
          Delete permanently
        </button>
      </div>
    </section>
  );
}
