import type { FunctionComponent } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { api } from '../api/client.ts';
import { type FormErrors, failureOf, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components, operations } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { count, usdExact } from '../format.ts';
import { served } from '../layout.tsx';
import { may } from '../permissions.ts';
import { describedBy, Field, FormError, Loading } from '../ui.tsx';
import { BatchesSection } from './batches-section.tsx';
import { ConnectionsList } from './connections-list.tsx';

type Rule = components['schemas']['GuardrailRule'];
type Guardrails = components['schemas']['Guardrails'];
type TestAnswer = components['schemas']['GuardrailTest'];
type Model = components['schemas']['ManagementModel'];
type CreateRule = operations['guardrails.create']['requestBody']['content']['application/json'];
type RulePatch = operations['guardrails.update']['requestBody']['content']['application/json'];

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

const DETECTORS: ReadonlyArray<[CreateRule['detector'], string]> = [
  ['email', 'email addresses'],
  ['card_number', 'card numbers (Luhn-valid)'],
  ['secret', 'secrets (well-known credential formats)'],
  ['pattern', 'my own pattern (RE2)'],
];

const PATTERN_HINT = 'A regular expression in RE2 syntax, (?i) for case-insensitive; only for the pattern detector';

function RuleFields({ errors, rule, prefix }: { errors: FormErrors; rule?: Rule; prefix: string }) {
  return (
    <>
      <Field id={`${prefix}-name`} label="Name" error={errors.fields.name}>
        <input id={`${prefix}-name`} name="name" maxLength={64} defaultValue={rule?.name ?? ''} aria-describedby={describedBy(`${prefix}-name`, null, errors.fields.name)} />
      </Field>
      {rule ? null : (
        <Field id={`${prefix}-detector`} label="Detects" error={errors.fields.detector}>
          <select id={`${prefix}-detector`} name="detector" defaultValue="pattern">
            {DETECTORS.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </Field>
      )}
      {rule && rule.detector !== 'pattern' ? null : (
        <Field id={`${prefix}-pattern`} label="Pattern" error={errors.fields.pattern} hint={PATTERN_HINT}>
          <input
            id={`${prefix}-pattern`}
            name="pattern"
            class="mono"
            defaultValue={rule?.pattern ?? ''}
            aria-describedby={describedBy(`${prefix}-pattern`, PATTERN_HINT, errors.fields.pattern)}
          />
        </Field>
      )}
      <Field id={`${prefix}-action`} label="On a match" error={errors.fields.action}>
        <select id={`${prefix}-action`} name="action" defaultValue={rule?.action ?? 'block'}>
          <option value="block">block the call (422)</option>
          <option value="redact">redact the match</option>
        </select>
      </Field>
      <label class="check">
        <input type="checkbox" name="enabled" defaultChecked={rule?.enabled ?? true} /> Enabled
      </label>
    </>
  );
}

/** A rule's create or edit form: the fields the API takes, its errors at the field its `param` names. */
function RuleForm({ rule, onSaved, onCancel }: { rule?: Rule; onSaved: (rule: Rule) => void; onCancel?: () => void }) {
  const verdict = may(session.value!, 'guardrails.write');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  const prefix = rule ? `edit-${rule.id}` : 'new-rule';
  // Edit opens this form below the table: the keyboard goes with it.
  const holder = useRef<HTMLFormElement>(null);
  useEffect(() => {
    if (rule) holder.current?.querySelector<HTMLInputElement>('input[name="name"]')?.focus();
  }, [rule?.id]);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    const form = new FormData(element);
    const pattern = String(form.get('pattern') ?? '');
    const shared = { name: String(form.get('name') ?? ''), action: form.get('action') as Rule['action'], enabled: form.get('enabled') === 'on' };
    setBusy(true);
    try {
      let saved: Rule;
      if (rule) {
        const patch: RulePatch = { ...shared, ...(rule.detector === 'pattern' ? { pattern } : {}) };
        saved = unwrap(await api.PATCH('/guardrails/rules/{id}', { params: { path: { id: rule.id } }, body: patch }));
      } else {
        const detector = form.get('detector') as CreateRule['detector'];
        // A pattern typed for a built-in detector is sent, so the API says it takes none.
        const body: CreateRule = { ...shared, detector, ...(pattern !== '' || detector === 'pattern' ? { pattern } : {}) };
        saved = unwrap(await api.POST('/guardrails/rules', { body }));
        element.reset();
      }
      setErrors(NO_ERRORS);
      onSaved(saved);
    } catch (error) {
      setErrors(formErrorsOf(error, ['name', 'detector', 'pattern', 'action', 'enabled']));
    } finally {
      setBusy(false);
    }
  };
  const title = rule ? `Edit rule ${rule.name}` : 'Add a rule';
  return (
    <form class="card" ref={holder} onSubmit={(event) => void submit(event)} noValidate aria-label={title}>
      <h3>{title}</h3>
      {verdict.allowed ? null : (
        <p class="hint" id={`${prefix}-reason`}>
          {verdict.reason}
        </p>
      )}
      <fieldset disabled={!verdict.allowed || busy} aria-describedby={verdict.allowed ? undefined : `${prefix}-reason`}>
        <FormError message={errors.form} />
        <RuleFields errors={errors} prefix={prefix} {...(rule ? { rule } : {})} />
        <div class="actions">
          <button type="submit">{rule ? 'Save rule' : 'Add rule'}</button>
          {onCancel ? (
            <button type="button" onClick={onCancel}>
              Cancel
            </button>
          ) : null}
        </div>
      </fieldset>
    </form>
  );
}

/** A sample text run through the enabled rules by the API (`/guardrails/test`): nothing is stored. */
function TryRules() {
  const [answer, setAnswer] = useState<TestAnswer | null>(null);
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const text = String(new FormData(event.currentTarget as HTMLFormElement).get('text') ?? '');
    try {
      setAnswer(unwrap(await api.POST('/guardrails/test', { body: { text } })));
      setErrors(NO_ERRORS);
    } catch (error) {
      setAnswer(null);
      setErrors(formErrorsOf(error, ['text']));
    }
  };
  return (
    <form class="card" onSubmit={(event) => void submit(event)} noValidate aria-labelledby="try-title">
      <h3 id="try-title">Try a text</h3>
      <FormError message={errors.form} />
      <Field id="try-text" label="Sample input (not stored)" error={errors.fields.text}>
        <textarea id="try-text" name="text" rows={4} aria-describedby={describedBy('try-text', null, errors.fields.text)} />
      </Field>
      <button type="submit">Try the enabled rules</button>
      {answer ? (
        <div role="status" data-testid="try-result" data-action={answer.action}>
          <p>
            Outcome: <strong>{answer.action === 'allow' ? 'allowed' : answer.action === 'block' ? `blocked by ${answer.rule}` : `redacted (first by ${answer.rule})`}</strong>
          </p>
          {answer.text === null ? null : (
            <>
              <p>Sent upstream as:</p>
              <pre class="body" data-testid="try-text-out">
                {answer.text}
              </pre>
            </>
          )}
          {answer.findings.length ? (
            <ul>
              {answer.findings.map((finding) => (
                <li key={`${finding.ruleId}:${finding.name}`}>
                  {finding.name} ({finding.detector}, {finding.action}): {count(finding.matches)} {finding.matches === 1 ? 'match' : 'matches'}
                </li>
              ))}
            </ul>
          ) : null}
        </div>
      ) : null}
    </form>
  );
}

function GuardrailsSection() {
  const write = may(session.value!, 'guardrails.write');
  const [guardrails, setGuardrails] = useState<Guardrails | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [editing, setEditing] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = () =>
    api
      .GET('/guardrails')
      .then((result) => {
        setGuardrails(unwrap(result));
        setFailure(null);
      })
      .catch((error: unknown) => setFailure(messageOf(error)));
  useEffect(() => void load(), []);
  const saved = (what: string) => (rule: Rule) => {
    setEditing(null);
    setNotice(`${what}: ${rule.name}`);
    void load();
  };
  const remove = async (rule: Rule) => {
    if (!confirm(`Delete the rule “${rule.name}”? Calls are no longer checked by it.`)) return;
    try {
      unwrap(await api.DELETE('/guardrails/rules/{id}', { params: { path: { id: rule.id } } }));
      setNotice(`Rule deleted: ${rule.name}`);
      await load();
    } catch (error) {
      setFailure(messageOf(error));
    }
  };
  const editedRule = guardrails?.rules.find((rule) => rule.id === editing);
  return (
    <section aria-labelledby="guardrails-title">
      <h2 id="guardrails-title">Data guardrails</h2>
      <p class="hint">Enabled rules run on the input of every /v1 call before it goes upstream, in this order.</p>
      {write.allowed ? null : (
        <p class="hint" id="rules-reason">
          {write.reason}
        </p>
      )}
      {failure ? <p role="alert">{failure}</p> : null}
      {notice ? <p role="status">{notice}</p> : null}
      {guardrails === null ? (
        failure ? null : (
          <Loading what="guardrail rules" />
        )
      ) : guardrails.rules.length === 0 ? (
        <p>No rules yet (at most {guardrails.maxRules}).</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="rule-table">
            <caption class="visually-hidden">
              Guardrail rules in the order they apply ({guardrails.rules.length} of at most {guardrails.maxRules})
            </caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Detects</th>
                <th scope="col">On a match</th>
                <th scope="col">State</th>
                <th scope="col">Change</th>
              </tr>
            </thead>
            <tbody>
              {guardrails.rules.map((rule) => (
                <tr key={rule.id} data-rule-id={rule.id}>
                  <td>{rule.name}</td>
                  <td>{rule.detector === 'pattern' ? <code class="mono">{rule.pattern}</code> : rule.detector.replace('_', ' ')}</td>
                  <td>{rule.action}</td>
                  <td>{rule.enabled ? 'enabled' : 'disabled'}</td>
                  <td class="actions">
                    <button
                      type="button"
                      disabled={!write.allowed}
                      aria-describedby={write.allowed ? undefined : 'rules-reason'}
                      aria-label={`Edit ${rule.name}`}
                      onClick={() => setEditing(rule.id)}
                    >
                      Edit
                    </button>
                    <button
                      type="button"
                      class="danger"
                      disabled={!write.allowed}
                      aria-describedby={write.allowed ? undefined : 'rules-reason'}
                      aria-label={`Delete ${rule.name}`}
                      onClick={() => void remove(rule)}
                    >
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {editedRule ? <RuleForm key={editedRule.id} rule={editedRule} onSaved={saved('Rule saved')} onCancel={() => setEditing(null)} /> : null}
      <RuleForm onSaved={saved('Rule added')} />
      {served.value.has('POST /guardrails/test') ? <TryRules /> : null}
    </section>
  );
}

/** A price as the API gives it; null is a unit the model does not price. */
function Price({ usd, per }: { usd: number | null; per: string }) {
  return usd === null ? <span class="muted">—</span> : <span data-usd={String(usd)}>{`${usdExact(usd)} ${per}`}</span>;
}

function UnitPrices({ prices }: { prices: NonNullable<Model['prices']> }) {
  const units: Array<[string, number]> = [];
  if (prices.perImageUsd !== null) units.push(['per image', prices.perImageUsd]);
  for (const [size, qualities] of Object.entries(prices.images ?? {})) {
    for (const [quality, usd] of Object.entries(qualities)) units.push([`per ${size} ${quality} image`, usd]);
  }
  if (prices.perCharacterUsd !== null) units.push(['per character', prices.perCharacterUsd]);
  if (prices.perAudioSecondUsd !== null) units.push(['per audio second', prices.perAudioSecondUsd]);
  if (prices.perWebSearchUsd !== null) units.push(['per web search', prices.perWebSearchUsd]);
  if (units.length === 0) return <span class="muted">—</span>;
  return (
    <ul class="plain">
      {units.map(([per, usd]) => (
        <li key={per}>
          <Price usd={usd} per={per} />
        </li>
      ))}
    </ul>
  );
}

function ModelsSection() {
  const [models, setModels] = useState<readonly Model[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    api
      .GET('/models')
      .then((result) => setModels(unwrap(result).data))
      .catch((error: unknown) => setFailure(messageOf(error)));
  }, []);
  return (
    <section aria-labelledby="models-title">
      <h2 id="models-title">Models and prices</h2>
      {failure ? <p role="alert">{failure}</p> : null}
      {models === null ? (
        failure ? null : (
          <Loading what="models" />
        )
      ) : models.length === 0 ? (
        <p>No models.</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="model-table">
            <caption class="visually-hidden">Models you can call, in catalogue order, with what a call is billed</caption>
            <thead>
              <tr>
                <th scope="col">Model</th>
                <th scope="col">In / out</th>
                <th scope="col">Context</th>
                <th scope="col">Input</th>
                <th scope="col">Cached input</th>
                <th scope="col">Cache write</th>
                <th scope="col">Output</th>
                <th scope="col">Other units</th>
                <th scope="col">Batches</th>
              </tr>
            </thead>
            <tbody>
              {models.map((model) => (
                <tr key={model.id} data-model-id={model.id}>
                  <td class="mono">{model.id}</td>
                  <td>
                    {model.svc_modalities.input.join(', ')} → {model.svc_modalities.output.join(', ')}
                  </td>
                  <td>
                    {count(model.context_window)} tokens, {count(model.max_output_tokens)} out
                  </td>
                  {model.prices === null ? (
                    <td colSpan={5} class="muted">
                      not metered
                    </td>
                  ) : (
                    <>
                      <td data-price="input">
                        <Price usd={model.prices.inputPerMTokUsd} per="/ M tokens" />
                      </td>
                      <td data-price="cachedInput">
                        <Price usd={model.prices.cachedInputPerMTokUsd} per="/ M tokens" />
                      </td>
                      <td data-price="cacheWrite">
                        <Price usd={model.prices.cacheWritePerMTokUsd} per="/ M tokens" />
                      </td>
                      <td data-price="output">
                        <Price usd={model.prices.outputPerMTokUsd} per="/ M tokens" />
                      </td>
                      <td>
                        <UnitPrices prices={model.prices} />
                      </td>
                    </>
                  )}
                  <td>{model.svc_batch ? 'yes' : 'no'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

interface ServiceRoot {
  surfaces: Record<string, string>;
}

/** A URL to paste into a client, selectable and copyable. */
function PasteUrl({ id, label, url }: { id: string; label: string; url: string }) {
  const [copied, setCopied] = useState(false);
  return (
    <div class="field">
      <label for={id}>{label}</label>
      <div class="actions">
        <input id={id} class="mono" readOnly value={url} onFocus={(event) => event.currentTarget.select()} />
        <button
          type="button"
          aria-label={`Copy ${label}`}
          onClick={() =>
            void navigator.clipboard.writeText(url).then(
              () => setCopied(true),
              () => undefined,
            )
          }
        >
          {copied ? 'Copied' : 'Copy'}
        </button>
      </div>
    </div>
  );
}

/** Where MCP clients connect, as the service itself advertises it (`GET /`). */
function ConnectorsSection() {
  const [root, setRoot] = useState<ServiceRoot | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    fetch('/', { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(async (response) => {
        const body = (await response.json()) as ServiceRoot;
        if (!response.ok) throw failureOf(response.status, body);
        setRoot(body);
      })
      .catch((error: unknown) => setFailure(messageOf(error)));
  }, []);
  if (failure) return <p role="alert">{failure}</p>;
  if (root === null) return <Loading what="the service’s surfaces" />;
  // A surface on this host is a path; one on another host (the sign-in connector's auth_url) is absolute.
  const absolute = (url: string) => new URL(url, location.origin).href;
  const withKey = root.surfaces.mcp ? absolute(root.surfaces.mcp) : null;
  const signingIn = root.surfaces.connectorMcp ? absolute(root.surfaces.connectorMcp) : null;
  return (
    <section aria-labelledby="connectors-title">
      <h2 id="connectors-title">MCP connectors</h2>
      <p>Every management operation is also an MCP tool. A client reaches it one of two ways.</p>
      {withKey ? (
        <div class="card">
          <h3>With an API key</h3>
          <PasteUrl id="mcp-key-url" label="MCP URL (with a key)" url={withKey} />
          <p class="hint">
            Send <code class="mono">Authorization: Bearer svc_live_…</code> with a key holding <code class="mono">mcp:read</code> (and <code class="mono">mcp:write</code> for write tools).
            For example Claude Code: <code class="mono">claude mcp add --transport http svc {withKey} --header "Authorization: Bearer $SVC_API_KEY"</code>
          </p>
        </div>
      ) : null}
      {signingIn ? (
        <div class="card">
          <h3>By signing in (OAuth)</h3>
          <PasteUrl id="mcp-connector-url" label="MCP URL (sign in)" url={signingIn} />
          <p class="hint">
            No key: the client registers itself, you sign in, pick one project and approve the scopes. Claude: Settings → Connectors → Add custom connector. ChatGPT: Settings → Connectors →
            Create (developer mode), authentication OAuth. Claude and ChatGPT connect from their own servers, so this address must be reachable from the internet.
          </p>
        </div>
      ) : (
        <p>Signing in from a connector is not offered by this deployment (the oauth plugin is off).</p>
      )}
      {signingIn && served.value.has('GET /oauth/connections') ? <ConnectionsList /> : null}
    </section>
  );
}

interface SettingsSection {
  readonly slug: string;
  readonly title: string;
  /** Operations the section reads; it is left out when the deployment lacks any. */
  readonly needs: readonly string[];
  readonly component: FunctionComponent;
}

const SECTIONS: readonly SettingsSection[] = [
  { slug: 'guardrails', title: 'Data guardrails', needs: ['GET /guardrails'], component: GuardrailsSection },
  { slug: 'models', title: 'Models and prices', needs: ['GET /models'], component: ModelsSection },
  { slug: 'batches', title: 'Batches', needs: ['GET /batches'], component: BatchesSection },
  { slug: 'connectors', title: 'MCP connectors', needs: [], component: ConnectorsSection },
];

/** Gateway settings, one section per sub-route (`/console/settings/<section>`). */
export function SettingsPage() {
  const { params } = useRoute();
  const sections = SECTIONS.filter((section) => section.needs.every((operation) => served.value.has(operation)));
  const current = sections.find((section) => section.slug === params.section) ?? sections[0]!;
  const Section = current.component;
  return (
    <section>
      <h1>Gateway settings</h1>
      <nav aria-label="Settings sections" class="subnav">
        <ul>
          {sections.map((section) => (
            <li key={section.slug}>
              <a href={`/console/settings/${section.slug}`} aria-current={section === current ? 'page' : undefined}>
                {section.title}
              </a>
            </li>
          ))}
        </ul>
      </nav>
      <Section key={current.slug} />
    </section>
  );
}
