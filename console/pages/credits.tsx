import { useEffect, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import { ApiFailure, type FormErrors, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components, operations } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { usdExact, usdFromMicros } from '../format.ts';
import { served } from '../layout.tsx';
import { type Act, may } from '../permissions.ts';
import { describedBy, Field, FormError, Loading, Time } from '../ui.tsx';
import { useVisiblePolling } from '../visible-polling.ts';

type Balance = components['schemas']['CreditBalance'];
type Summary = components['schemas']['CreditSummary'];
type Line = components['schemas']['LedgerEntry'];
type Budget = components['schemas']['Budget'];
type Lens = NonNullable<NonNullable<operations['credits.statement']['parameters']['query']>['lens']>;
type CapInput = NonNullable<operations['budget.update']['requestBody']['content']['application/json']['accountCap']>;

/** Balance and budget are asked for again this often while the page is visible: calls spend as it is open. */
const BALANCE_POLL_MS = 15_000;
const STATEMENT_PAGE = 50;

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** Empty inputs are absent fields; numbers as numbers, so the API's own validation speaks. */
function optionalNumber(value: FormDataEntryValue | null): number | undefined {
  return value === null || value === '' ? undefined : Number(value);
}

function optionalText(value: FormDataEntryValue | null): string | undefined {
  const text = String(value ?? '').trim();
  return text === '' ? undefined : text;
}

/** A notice above a form: what the API answered to the last act. */
function Notice({ text }: { text: string | null }) {
  return text ? <p role="status">{text}</p> : null;
}

function BalanceFigures({ balance }: { balance: Balance }) {
  return (
    <dl class="figures">
      <div class="figure">
        <dt>Balance</dt>
        <dd data-testid="balance" data-micros={balance.balanceMicros}>
          {usdFromMicros(balance.balanceMicros)}
        </dd>
      </div>
    </dl>
  );
}

/** An owner's payment through the payment provider: the amount, and a reference that is never charged twice. */
function TopUpForm({ onPaid }: { onPaid: () => void }) {
  const verdict = may(session.value!, 'credits.pay');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    const form = new FormData(element);
    const reference = optionalText(form.get('reference'));
    const note = optionalText(form.get('note'));
    // amountUsd left empty is sent absent, and the API names it.
    const body = { amountUsd: optionalNumber(form.get('amountUsd')) as number, ...(reference ? { reference } : {}), ...(note ? { note } : {}) };
    setBusy(true);
    try {
      const paid = unwrap(await api.POST('/credits/topup', { body }));
      element.reset();
      setErrors(NO_ERRORS);
      setNotice(
        paid.line === null
          ? `Reference ${reference ?? ''} was recorded before: not charged again. Balance ${usdExact(paid.balanceUsd)}`
          : `Payment of ${usdExact(paid.line.amountUsd)} recorded. Balance ${usdExact(paid.balanceUsd)}`,
      );
      onPaid();
    } catch (error) {
      setNotice(null);
      setErrors(formErrorsOf(error, ['amountUsd', 'reference', 'note']));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={(event) => void submit(event)} noValidate aria-labelledby="topup-title">
      <h3 id="topup-title">Top up</h3>
      {verdict.allowed ? null : (
        <p class="hint" id="topup-reason">
          {verdict.reason}
        </p>
      )}
      <Notice text={notice} />
      <fieldset disabled={!verdict.allowed || busy} aria-describedby={verdict.allowed ? undefined : 'topup-reason'}>
        <FormError message={errors.form} />
        <Field id="topup-amount" label="Amount (USD)" error={errors.fields.amountUsd}>
          <input id="topup-amount" name="amountUsd" type="number" min="0" step="0.000001" inputMode="decimal" aria-describedby={describedBy('topup-amount', null, errors.fields.amountUsd)} />
        </Field>
        <Field id="topup-reference" label="Payment reference (optional)" error={errors.fields.reference} hint="The same reference is never charged twice">
          <input
            id="topup-reference"
            name="reference"
            maxLength={200}
            aria-describedby={describedBy('topup-reference', 'The same reference is never charged twice', errors.fields.reference)}
          />
        </Field>
        <Field id="topup-note" label="Note (optional)" error={errors.fields.note}>
          <input id="topup-note" name="note" maxLength={500} aria-describedby={describedBy('topup-note', null, errors.fields.note)} />
        </Field>
        <button type="submit">Record payment</button>
      </fieldset>
    </form>
  );
}

function RedeemForm({ onRedeemed }: { onRedeemed: () => void }) {
  const verdict = may(session.value!, 'credits.pay');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    setBusy(true);
    try {
      const redeemed = unwrap(await api.POST('/credits/redeem', { body: { code: String(new FormData(element).get('code') ?? '') } }));
      element.reset();
      setErrors(NO_ERRORS);
      setNotice(`${redeemed.label}: ${usdExact(redeemed.amountUsd)} added. Balance ${usdExact(redeemed.balanceUsd)}`);
      onRedeemed();
    } catch (error) {
      setNotice(null);
      setErrors(formErrorsOf(error, ['code']));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="card" onSubmit={(event) => void submit(event)} noValidate aria-labelledby="redeem-title">
      <h3 id="redeem-title">Redeem a promotion code</h3>
      {verdict.allowed ? null : (
        <p class="hint" id="redeem-reason">
          {verdict.reason}
        </p>
      )}
      <Notice text={notice} />
      <fieldset disabled={!verdict.allowed || busy} aria-describedby={verdict.allowed ? undefined : 'redeem-reason'}>
        <FormError message={errors.form} />
        <Field id="redeem-code" label="Code" error={errors.fields.code}>
          <input id="redeem-code" name="code" class="mono" maxLength={64} autoComplete="off" aria-describedby={describedBy('redeem-code', null, errors.fields.code)} />
        </Field>
        <button type="submit">Redeem</button>
      </fieldset>
    </form>
  );
}

/** Opening + payments + adjustments − hosting − AI = closing, from the API's exact integers. */
function SummaryLedger({ version }: { version: number }) {
  const [span, setSpan] = useState<{ from?: string; to?: string }>({});
  const [summary, setSummary] = useState<Summary | null>(null);
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  useEffect(() => {
    api
      .GET('/credits/summary', { params: { query: span } })
      .then((result) => {
        setSummary(unwrap(result));
        setErrors(NO_ERRORS);
      })
      .catch((error: unknown) => setErrors(formErrorsOf(error, ['from', 'to'])));
  }, [span, version]);
  const rows: Array<[string, string]> = summary
    ? [
        ['Opening balance', summary.micros.opening],
        ['+ Payments', summary.micros.payments],
        ['+ Adjustments and promotions', summary.micros.adjustments],
        ['− Hosting', summary.micros.hosting],
        ['− AI usage', summary.micros.ai],
        ['= Closing balance', summary.micros.closing],
      ]
    : [];
  return (
    <section aria-labelledby="summary-title">
      <h2 id="summary-title">Summary</h2>
      <form
        class="filters"
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          const form = new FormData(event.currentTarget);
          setSpan({ ...(optionalText(form.get('from')) ? { from: String(form.get('from')) } : {}), ...(optionalText(form.get('to')) ? { to: String(form.get('to')) } : {}) });
        }}
      >
        <Field id="summary-from" label="From (UTC day, inclusive)" error={errors.fields.from}>
          <input id="summary-from" name="from" type="date" aria-describedby={describedBy('summary-from', null, errors.fields.from)} />
        </Field>
        <Field id="summary-to" label="To (UTC day, exclusive)" error={errors.fields.to}>
          <input id="summary-to" name="to" type="date" aria-describedby={describedBy('summary-to', null, errors.fields.to)} />
        </Field>
        <div class="field filters-submit">
          <button type="submit">Show summary</button>
        </div>
      </form>
      <FormError message={errors.form} />
      {summary === null ? (
        errors.form ? null : (
          <Loading what="the summary" />
        )
      ) : (
        <div class="table-wrap">
          <table data-testid="summary-table">
            <caption>{span.from || span.to ? `From ${span.from ?? 'the start'} to ${span.to ?? 'now'}` : 'Since the account began'}</caption>
            <tbody>
              {rows.map(([label, micros]) => (
                <tr key={label} data-micros={micros}>
                  <th scope="row">{label}</th>
                  <td>{usdFromMicros(micros)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

const LENSES: ReadonlyArray<[Lens | '', string]> = [
  ['', 'every line'],
  ['payments', 'payments'],
  ['usage', 'AI usage'],
  ['hosting', 'hosting'],
];

/** The ledger newest first, narrowed by the API's `lens`; More follows its cursor with the same lens. */
function Statement({ version }: { version: number }) {
  const [lens, setLens] = useState<Lens | ''>('');
  const [lines, setLines] = useState<readonly Line[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const page = async (cursor: string | null) => {
    const query = { limit: STATEMENT_PAGE, ...(lens ? { lens } : {}), ...(cursor ? { cursor } : {}) };
    return unwrap(await api.GET('/credits/statement', { params: { query } }));
  };
  useEffect(() => {
    setLines(null);
    page(null)
      .then((answer) => {
        setFailure(null);
        setLines(answer.data);
        setNext(answer.nextCursor);
      })
      .catch((error: unknown) => setFailure(messageOf(error)));
  }, [lens, version]);
  const more = async () => {
    setBusy(true);
    try {
      const answer = await page(next);
      setLines((shown) => [...(shown ?? []), ...answer.data]);
      setNext(answer.nextCursor);
    } catch (error) {
      setFailure(messageOf(error));
    } finally {
      setBusy(false);
    }
  };
  return (
    <section aria-labelledby="statement-title">
      <h2 id="statement-title">Statement</h2>
      <form class="filters" onSubmit={(event) => event.preventDefault()}>
        <div class="field">
          <label for="statement-lens">Show</label>
          <select id="statement-lens" value={lens} onChange={(event) => setLens(event.currentTarget.value as Lens | '')}>
            {LENSES.map(([value, label]) => (
              <option key={value} value={value}>
                {label}
              </option>
            ))}
          </select>
        </div>
      </form>
      {failure ? <p role="alert">{failure}</p> : null}
      {lines === null ? (
        failure ? null : (
          <Loading what="the statement" />
        )
      ) : lines.length === 0 ? (
        <p>No ledger lines.</p>
      ) : (
        <>
          <div class="table-wrap">
            <table data-testid="statement-table">
              <caption class="visually-hidden">Ledger lines, newest first</caption>
              <thead>
                <tr>
                  <th scope="col">When</th>
                  <th scope="col">Kind</th>
                  <th scope="col">Amount</th>
                  <th scope="col">Balance after</th>
                  <th scope="col">Note</th>
                  <th scope="col">Reference</th>
                </tr>
              </thead>
              <tbody>
                {lines.map((line) => (
                  <tr key={line.id} data-line-id={line.id}>
                    <td>
                      <Time iso={line.createdAt} />
                      {line.coversUtcDay ? <span class="muted"> (covers {line.coversUtcDay} UTC)</span> : null}
                    </td>
                    <td>{line.kind.replace(/_/g, ' ')}</td>
                    <td data-usd={String(line.amountUsd)}>{usdExact(line.amountUsd)}</td>
                    <td data-usd={String(line.balanceAfterUsd)}>{usdExact(line.balanceAfterUsd)}</td>
                    <td>{line.note ?? ''}</td>
                    <td class="mono">{line.reference ?? ''}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {next ? (
            <button type="button" disabled={busy} onClick={() => void more()}>
              More
            </button>
          ) : null}
        </>
      )}
    </section>
  );
}

interface Target {
  readonly value: string;
  readonly label: string;
  readonly act: Act;
  readonly set: (cap: CapInput | null) => Promise<unknown>;
}

/** Where a cap can be set, each through its own operation: the account, a project, a key. */
function useCapTargets(): readonly Target[] {
  const [projects, setProjects] = useState<ReadonlyArray<{ id: string; name: string }>>([]);
  const [keys, setKeys] = useState<ReadonlyArray<{ id: string; name: string; status: string }>>([]);
  useEffect(() => {
    api
      .GET('/projects', { params: { query: { limit: 200 } } })
      .then((result) => setProjects(unwrap(result).data))
      .catch(() => undefined);
    api
      .GET('/keys', { params: { query: { limit: 200 } } })
      .then((result) => setKeys(unwrap(result).data))
      .catch(() => undefined);
  }, []);
  return [
    { value: 'account', label: 'The account', act: 'budget.cap', set: async (cap) => unwrap(await api.PATCH('/budget', { body: { accountCap: cap } })) },
    ...projects.map(
      (project): Target => ({
        value: `project:${project.id}`,
        label: `Project ${project.name}`,
        act: 'projects.cap',
        set: async (cap) => unwrap(await api.PATCH('/projects/{id}', { params: { path: { id: project.id } }, body: { spendCap: cap } })),
      }),
    ),
    ...keys
      .filter((key) => key.status !== 'revoked')
      .map(
        (key): Target => ({
          value: `key:${key.id}`,
          label: `Key ${key.name}`,
          act: 'keys.limits',
          set: async (cap) => unwrap(await api.PATCH('/keys/{id}', { params: { path: { id: key.id } }, body: { spendCap: cap } })),
        }),
      ),
  ];
}

/** A cap's error names `accountCap.usd` or `spendCap.usd`; the form's fields are usd, period and mode. */
function capErrorsOf(error: unknown): FormErrors {
  if (!(error instanceof ApiFailure) || error.param === null) return formErrorsOf(error, []);
  const param = error.param.replace(/^(accountCap|spendCap)\.?/, '') || null;
  return formErrorsOf(new ApiFailure(error.message, error.status, error.code, param), ['usd', 'period', 'mode']);
}

function CapForm({ onChanged }: { onChanged: () => void }) {
  const targets = useCapTargets();
  const [chosen, setChosen] = useState('account');
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [notice, setNotice] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const target = targets.find((each) => each.value === chosen) ?? targets[0]!;
  const verdict = may(session.value!, target.act);
  const apply = async (cap: CapInput | null) => {
    setBusy(true);
    try {
      await target.set(cap);
      setErrors(NO_ERRORS);
      setNotice(cap === null ? `Cap removed from ${target.label.toLowerCase()}` : `Cap set on ${target.label.toLowerCase()}`);
      onChanged();
    } catch (error) {
      setNotice(null);
      setErrors(capErrorsOf(error));
    } finally {
      setBusy(false);
    }
  };
  const submit = (event: SubmitEvent) => {
    event.preventDefault();
    const form = new FormData(event.currentTarget as HTMLFormElement);
    const usd = optionalNumber(form.get('usd')) as number;
    void apply({ usd, period: form.get('period') as CapInput['period'], mode: form.get('mode') as CapInput['mode'] });
  };
  return (
    <form class="card" onSubmit={submit} noValidate aria-labelledby="cap-title">
      <h3 id="cap-title">Set a spend cap</h3>
      <Field id="cap-target" label="Cap on">
        <select id="cap-target" value={target.value} onChange={(event) => setChosen(event.currentTarget.value)}>
          {targets.map((each) => (
            <option key={each.value} value={each.value}>
              {each.label}
            </option>
          ))}
        </select>
      </Field>
      {verdict.allowed ? null : (
        <p class="hint" id="cap-reason">
          {verdict.reason}
        </p>
      )}
      <Notice text={notice} />
      <fieldset disabled={!verdict.allowed || busy} aria-describedby={verdict.allowed ? undefined : 'cap-reason'}>
        <FormError message={errors.form} />
        <Field id="cap-usd" label="Cap (USD)" error={errors.fields.usd}>
          <input id="cap-usd" name="usd" type="number" min="0" step="0.01" inputMode="decimal" aria-describedby={describedBy('cap-usd', null, errors.fields.usd)} />
        </Field>
        <Field id="cap-period" label="Per" error={errors.fields.period}>
          <select id="cap-period" name="period" defaultValue="month">
            <option value="day">day (UTC)</option>
            <option value="week">week</option>
            <option value="month">month</option>
            <option value="total">all time</option>
          </select>
        </Field>
        <Field id="cap-mode" label="At the cap" error={errors.fields.mode}>
          <select id="cap-mode" name="mode" defaultValue="blocking">
            <option value="blocking">block calls (402)</option>
            <option value="alert">alert only</option>
          </select>
        </Field>
        <div class="actions">
          <button type="submit">Set cap</button>
          <button type="button" class="danger" onClick={() => void apply(null)}>
            Remove cap
          </button>
        </div>
      </fieldset>
    </form>
  );
}

function Budgets({ budget, onChanged }: { budget: Budget; onChanged: () => void }) {
  return (
    <section aria-labelledby="budgets-title">
      <h2 id="budgets-title">Budgets</h2>
      <p>
        Balance after calls not yet written: <strong data-testid="budget-balance">{usdExact(budget.balanceUsd)}</strong>
      </p>
      {budget.scopes.length === 0 ? (
        <p>No spend caps set.</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="budget-table">
            <caption class="visually-hidden">Spend against every cap you can see</caption>
            <thead>
              <tr>
                <th scope="col">Cap on</th>
                <th scope="col">Cap</th>
                <th scope="col">At the cap</th>
                <th scope="col">Spent this period</th>
                <th scope="col">Remaining</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {budget.scopes.map((scope) => (
                <tr key={`${scope.scope}:${scope.id}`} data-scope={scope.scope} data-scope-id={scope.id}>
                  <td>
                    {scope.scope} {scope.scope === 'key' ? <a href={`/console/keys/${scope.id}`}>{scope.name}</a> : scope.name}
                  </td>
                  <td>
                    {usdExact(scope.capUsd)} per {scope.period === 'total' ? 'all time' : scope.period}
                  </td>
                  <td>{scope.mode === 'blocking' ? 'block' : 'alert only'}</td>
                  <td>{usdExact(scope.spentUsd)}</td>
                  <td>{usdExact(scope.remainingUsd)}</td>
                  <td>
                    <span class={scope.state === 'ok' ? 'status' : 'status status-revoked'}>{scope.state}</span>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      <CapForm onChanged={onChanged} />
    </section>
  );
}

/** Credits and budgets: the balance, payments, the ledger and its summary, and spend against every cap. */
export function CreditsPage() {
  const [balance, setBalance] = useState<Balance | null>(null);
  const [budget, setBudget] = useState<Budget | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  // Bumped when the ledger changed here, so the statement and the summary are read again.
  const [version, setVersion] = useState(0);
  const refresh = async () => {
    try {
      const [credits, budgets] = await Promise.all([api.GET('/credits'), api.GET('/budget')]);
      setBalance(unwrap(credits));
      setBudget(unwrap(budgets));
      setFailure(null);
    } catch (error) {
      setFailure(messageOf(error));
    }
  };
  useVisiblePolling(refresh, BALANCE_POLL_MS);
  const ledgerChanged = () => {
    setVersion((value) => value + 1);
    void refresh();
  };
  return (
    <section>
      <h1>Credits and budgets</h1>
      {failure ? <p role="alert">{failure}</p> : null}
      <section aria-labelledby="credit-title">
        <h2 id="credit-title">Credit</h2>
        {balance === null ? failure ? null : <Loading what="the balance" /> : <BalanceFigures balance={balance} />}
        {served.value.has('POST /credits/topup') ? <TopUpForm onPaid={ledgerChanged} /> : null}
        {served.value.has('POST /credits/redeem') ? <RedeemForm onRedeemed={ledgerChanged} /> : null}
      </section>
      <SummaryLedger version={version} />
      <Statement version={version} />
      {budget === null ? failure ? null : <Loading what="budgets" /> : <Budgets budget={budget} onChanged={() => void refresh()} />}
    </section>
  );
}
