import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import { ApiFailure, type FormErrors, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { may } from '../permissions.ts';
import { describedBy, Field, FormError, Loading, TableRegion } from '../ui.tsx';

type EnvView = components['schemas']['AppEnvView'];
type EnvChange = components['schemas']['AppEnvChange'];
type KeyReplacement = components['schemas']['GatewayKeyReplacement'];
type ServiceState = components['schemas']['AppService']['state'];

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The API's limit on one value (`POST /services/{id}/env`), so a longer one is stopped while typed. */
const MAX_VALUE_CHARS = 32_768;

/** When a change reaches the app, as the API applies it (`restart` of POST /services/{id}/env), told before saving. */
function restartHint(state: ServiceState): string {
  if (state === 'stopped') return 'The service is stopped: a change applies when it next starts.';
  if (state === 'running') return 'Each save restarts the running app once: a new instance takes over once healthy.';
  return 'A change restarts the app once if it runs; a deploy under way starts with it.';
}

/** What each restart outcome of a change means for the app, in the words the page shows after a save. */
function restartNotice(what: string, answer: Pick<EnvChange, 'restart' | 'restartFailure'>): string {
  switch (answer.restart) {
    case 'done':
      return `${what}: the app restarted once with the change`;
    case 'none':
      return `${what}: nothing changed, so nothing restarted`;
    case 'next_start':
      return `${what}: the service is stopped; the change applies when it starts`;
    case 'next_deploy':
      return `${what}: nothing is live yet; the deploy under way starts with the change`;
    case 'failed':
      return (
        `${what}, but the restarted app failed its health check (${answer.restartFailure ?? 'no answer'}): ` +
        'the running one keeps serving with the old variables; the next start uses the new ones'
      );
  }
}

/** A replacement whose restart failed its health check: the API revoked the new key and kept the old. */
function keyKept(answer: Pick<KeyReplacement, 'restartFailure'>): string {
  const probe = answer.restartFailure ?? 'no answer';
  return `The app failed its health check with a new key (${probe}): it keeps its old key; the new one is revoked`;
}

/**
 * A change's error names `vars.<NAME>` (or `vars` for the whole set): a reserved or malformed name
 * belongs to the name field, a value the environment cannot carry to the value field.
 */
function envErrorsOf(error: unknown, fields: readonly ('name' | 'value')[]): FormErrors {
  if (!(error instanceof ApiFailure)) return formErrorsOf(error, []);
  const param = error.param ?? '';
  if (!/^vars(\.|$)/.test(param)) return formErrorsOf(error, []);
  const ofValue = error.code === 'invalid_env_value' || param === 'vars' || !fields.includes('name');
  const field = ofValue ? 'value' : 'name';
  return formErrorsOf(new ApiFailure(error.message, error.status, error.code, field), fields);
}

/** The one refusal the page answers with a reload: the variables changed since it read them. */
const isConflict = (error: unknown) => error instanceof ApiFailure && error.code === 'env_conflict';

interface VariableFormProps {
  /** The variable changed; none to add one. */
  name?: string;
  /** Its value when shown on the page, to start from. */
  value?: string;
  disabled: boolean;
  save: (name: string, value: string) => Promise<void>;
  onCancel?: () => void;
}

const NOT_REVEALED = 'Values are hidden: only who may change this app’s variables reads them.';

const NAME_HINT = 'Letters, digits and underscores; a name already set is replaced';

/**
 * Add a variable, or change one (`name` given): sends the version the page read, so a change that
 * landed since is refused (409) instead of being overwritten.
 */
function VariableForm(props: VariableFormProps) {
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const prefix = props.name ? 'env-edit' : 'env-new';
  const nameId = `${prefix}-name`;
  const nameNotes = describedBy(nameId, NAME_HINT, errors.fields.name);
  const holder = useRef<HTMLFormElement>(null);
  // Change opens this form below the table: the keyboard goes with it.
  useEffect(() => {
    if (props.name) holder.current?.querySelector<HTMLTextAreaElement>('textarea')?.focus();
  }, [props.name]);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    const form = new FormData(element);
    const name = props.name ?? String(form.get('name') ?? '');
    try {
      await props.save(name, String(form.get('value') ?? ''));
      setErrors(NO_ERRORS);
      if (!props.name) element.reset();
    } catch (error) {
      // A conflict is shown once, above the variables, with the reload it needs.
      setErrors(isConflict(error) ? NO_ERRORS : envErrorsOf(error, props.name ? ['value'] : ['name', 'value']));
    }
  };
  const title = props.name ? `Change ${props.name}` : 'Add a variable';
  const valueHint = props.name && props.value === undefined ? 'The current value stays hidden: type the new one' : null;
  return (
    <form class="card" ref={holder} onSubmit={(event) => void submit(event)} noValidate aria-label={title}>
      <h3>{title}</h3>
      <fieldset disabled={props.disabled}>
        <FormError message={errors.form} />
        {props.name ? null : (
          <Field id={nameId} label="Name" error={errors.fields.name} hint={NAME_HINT}>
            <input id={nameId} name="name" class="mono" maxLength={128} aria-describedby={nameNotes} />
          </Field>
        )}
        <Field id={`${prefix}-value`} label="Value" error={errors.fields.value} hint={valueHint}>
          <textarea
            id={`${prefix}-value`}
            name="value"
            class="mono"
            rows={2}
            maxLength={MAX_VALUE_CHARS}
            autoComplete="off"
            spellcheck={false}
            defaultValue={props.value ?? ''}
            aria-describedby={describedBy(`${prefix}-value`, valueHint, errors.fields.value)}
          />
        </Field>
        <div class="actions">
          <button type="submit">{props.name ? 'Save variable' : 'Add variable'}</button>
          {props.onCancel ? (
            <button type="button" onClick={props.onCancel}>
              Cancel
            </button>
          ) : null}
        </div>
      </fieldset>
    </form>
  );
}

interface VariableRowProps {
  name: string;
  shown: string | undefined;
  canReveal: boolean;
  disabled: boolean;
  onToggle: () => void;
  onChange: () => void;
  onDelete: () => void;
}

/** One variable: its name, its value only once shown, and what may be done to it. */
function VariableRow(props: VariableRowProps) {
  const { name, shown, disabled, onDelete } = props;
  const toggle = shown === undefined ? 'Show' : 'Hide';
  return (
    <tr data-env-name={name}>
      <td class="mono">{name}</td>
      <td class="wrap">
        {shown === undefined ? <span class="muted">hidden</span> : <span class="mono">{shown}</span>}
        {props.canReveal ? (
          <button type="button" aria-label={`${toggle} the value of ${name}`} onClick={props.onToggle}>
            {toggle}
          </button>
        ) : null}
      </td>
      <td>
        <div class="actions">
          <button type="button" disabled={disabled} aria-label={`Change ${name}`} onClick={props.onChange}>
            Change
          </button>
          <button type="button" class="danger" disabled={disabled} aria-label={`Delete ${name}`} onClick={onDelete}>
            Delete
          </button>
        </div>
      </td>
    </tr>
  );
}

/** A managed variable's value; the app's key is never shown: its hint, linked to the key's page. */
function ManagedValue({ variable }: { variable: EnvView['managed'][number] }) {
  if (variable.name !== 'SVC_API_KEY') return <span class="mono">{variable.value}</span>;
  if (variable.keyId === null) return <span class="muted">No key yet</span>;
  const key = <a href={`/console/keys/${variable.keyId}`}>{variable.hint ?? variable.keyId}</a>;
  return (
    <>
      The app’s own key {key} <span class="muted">(never shown)</span>
    </>
  );
}

/** The SVC_* variables the service sets at every start: read-only, with the app's key replaceable. */
function ManagedVariables(props: { managed: EnvView['managed']; disabled: boolean; onReplace: () => void }) {
  return (
    <>
      <h3>Set by the service</h3>
      <p class="hint">Given to the app at every start; they cannot be changed or removed here.</p>
      <TableRegion label="Variables set by the service">
        <table data-testid="managed-env-table">
          <caption class="visually-hidden">Variables the service sets, read-only</caption>
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Value</th>
            </tr>
          </thead>
          <tbody>
            {props.managed.map((variable) => (
              <tr key={variable.name} data-env-name={variable.name}>
                <td class="mono">{variable.name}</td>
                <td class="wrap">
                  <ManagedValue variable={variable} />
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </TableRegion>
      <div class="actions">
        <button type="button" class="danger" disabled={props.disabled} onClick={props.onReplace}>
          Replace gateway key
        </button>
      </div>
    </>
  );
}

/**
 * A service's variables (`GET /services/{id}/env`): names, each value hidden until shown one at a
 * time (offered only when the API says the caller may read them, `canReveal`), add, change and
 * delete, and the managed SVC_* ones read-only. Read once and after each change, never polled: the
 * version read is the lock every change sends, and a poll would slip a racing change past it.
 */
export function EnvSection({ serviceId, state }: { serviceId: string; state: ServiceState }) {
  const stopped = state === 'stopped';
  const deploy = may(session.value!, 'apps.deploy');
  const [env, setEnv] = useState<EnvView | null>(null);
  const [shown, setShown] = useState<Readonly<Record<string, string>>>({});
  const [editing, setEditing] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  /** Set when the API (or a later read) shows the variables changed since this page read them: what it means here. */
  const [conflict, setConflict] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const withService = { params: { path: { id: serviceId } } };
  const read = async (reveal: '0' | '1') => {
    const params = { path: { id: serviceId }, query: { reveal } };
    return unwrap(await api.GET('/services/{id}/env', { params }));
  };
  const load = async () => {
    try {
      setEnv(await read('0'));
      setShown({});
      setConflict(null);
      setFailure(null);
    } catch (error) {
      setFailure(messageOf(error));
    }
  };
  useEffect(() => void load(), [serviceId]);
  /** Runs a change; a 409 raises the reload offer; any other refusal is the caller's to place. */
  const change = async (what: string, run: () => Promise<EnvChange>) => {
    setBusy(stopped ? 'Saving…' : 'Saving: the app restarts with the change…');
    setNotice(null);
    try {
      const answer = await run();
      setEditing(null);
      setNotice(restartNotice(what, answer));
      await load();
    } catch (error) {
      if (isConflict(error)) setConflict('Nothing was saved.');
      throw error;
    } finally {
      setBusy(null);
    }
  };
  const save = (name: string, value: string) => {
    const body = { vars: { [name]: value }, version: env!.version };
    return change(`${name} saved`, async () => unwrap(await api.POST('/services/{id}/env', { ...withService, body })));
  };
  const remove = async (name: string) => {
    const effect = stopped ? 'The app starts without it.' : 'The app restarts once without it.';
    if (!confirm(`Delete ${name}? ${effect} Its value cannot be recovered.`)) return;
    const params = { path: { id: serviceId, name }, query: { version: env!.version } };
    try {
      await change(`${name} deleted`, async () => unwrap(await api.DELETE('/services/{id}/env/{name}', { params })));
    } catch (error) {
      if (!isConflict(error)) setFailure(messageOf(error));
    }
  };
  const reveal = async (name: string) => {
    try {
      const current = await read('1');
      // Another change landed since the list was read: a value of the newer set may not be the one listed.
      if (current.version !== env!.version) return setConflict('The value was not shown.');
      const value = current.vars.find((variable) => variable.name === name)?.value;
      if (value === undefined || value === null) return setFailure(`The value of ${name} is not readable`);
      setShown((values) => ({ ...values, [name]: value }));
    } catch (error) {
      setFailure(messageOf(error));
    }
  };
  const hide = (name: string) =>
    setShown((values) => {
      const rest = { ...values };
      delete rest[name];
      return rest;
    });
  const replaceKey = async () => {
    const effect = stopped ? 'The app gets the new key when it starts' : 'The app restarts once with the new key';
    if (!confirm(`Replace the app’s gateway key (SVC_API_KEY)? ${effect}; the old key is then revoked.`)) return;
    setBusy(stopped ? 'Replacing the key…' : 'Replacing the key: the app restarts with it…');
    setNotice(null);
    try {
      const answer: KeyReplacement = unwrap(await api.POST('/services/{id}/gateway-key/replace', withService));
      setNotice(answer.replaced ? restartNotice(`Gateway key replaced (now ${answer.hint})`, answer) : keyKept(answer));
      await load();
    } catch (error) {
      setFailure(messageOf(error));
    } finally {
      setBusy(null);
    }
  };
  const disabled = !deploy.allowed || busy !== null;
  const edited = env?.vars.find((variable) => variable.name === editing);
  return (
    <section aria-labelledby="env-title" data-testid="env-section">
      <h2 id="env-title">Variables</h2>
      <p class="hint" data-testid="env-restart-hint">
        {restartHint(state)}
      </p>
      {deploy.allowed ? null : <p class="hint">{deploy.reason}</p>}
      {busy ? <p role="status">{busy}</p> : null}
      {notice ? (
        <p role="status" data-testid="env-notice">
          {notice}
        </p>
      ) : null}
      {conflict ? (
        <div class="card" role="alert" data-testid="env-conflict">
          <p class="error form-error">The variables were changed elsewhere since this page read them. {conflict}</p>
          <p>Reload them, check your change is still wanted, then make it again.</p>
          <button type="button" onClick={() => void load()}>
            Reload variables
          </button>
        </div>
      ) : null}
      <FormError message={failure} />
      {env === null ? (
        failure ? null : (
          <Loading what="the variables" />
        )
      ) : (
        <>
          {env.canReveal ? null : <p class="hint">{NOT_REVEALED}</p>}
          {env.vars.length === 0 ? (
            <p>No variables yet.</p>
          ) : (
            <TableRegion label="Variables">
              <table data-testid="env-table">
                <caption class="visually-hidden">The app’s variables by name, values hidden until shown</caption>
                <thead>
                  <tr>
                    <th scope="col">Name</th>
                    <th scope="col">Value</th>
                    <th scope="col">Change</th>
                  </tr>
                </thead>
                <tbody>
                  {env.vars.map(({ name }) => (
                    <VariableRow
                      key={name}
                      name={name}
                      shown={shown[name]}
                      canReveal={env.canReveal}
                      disabled={disabled}
                      onToggle={() => (name in shown ? hide(name) : void reveal(name))}
                      onChange={() => setEditing(name)}
                      onDelete={() => void remove(name)}
                    />
                  ))}
                </tbody>
              </table>
            </TableRegion>
          )}
          {edited ? (
            <VariableForm
              key={edited.name}
              name={edited.name}
              {...(edited.name in shown ? { value: shown[edited.name] } : {})}
              disabled={disabled}
              save={save}
              onCancel={() => setEditing(null)}
            />
          ) : null}
          <VariableForm disabled={disabled} save={save} />
          <ManagedVariables managed={env.managed} disabled={disabled} onReplace={() => void replaceKey()} />
        </>
      )}
    </section>
  );
}
