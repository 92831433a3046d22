import { useEffect, useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { api } from '../api/client.ts';
import { type FormErrors, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components, operations } from '../api/schema.d.ts';
import { count, usd } from '../format.ts';
import { describedBy, Field, FormError, Loading, Time } from '../ui.tsx';

type RequestLog = components['schemas']['RequestLog'];
type RequestLogDetail = components['schemas']['RequestLogDetail'];
type Key = components['schemas']['Key'];
type Filters = NonNullable<operations['requests.list']['parameters']['query']>;

const FILTER_FIELDS = ['from', 'to', 'keyId', 'model', 'q', 'band', 'limit'] as const;
const PAGE_SIZES = [10, 50, 200] as const;

/** A datetime-local value (the viewer's zone) as the instant the API takes; empty means no bound. */
function instant(value: FormDataEntryValue | null): string | undefined {
  const text = String(value ?? '');
  return text === '' ? undefined : new Date(text).toISOString();
}

/** The form's filters as the API's query: only what was filled in, so an empty field filters nothing. */
function filtersOf(form: FormData): Filters {
  const filters: Filters = { limit: Number(form.get('limit')) };
  const from = instant(form.get('from'));
  const to = instant(form.get('to'));
  if (from) filters.from = from;
  if (to) filters.to = to;
  for (const name of ['keyId', 'model', 'q'] as const) {
    const value = String(form.get(name) ?? '').trim();
    if (value !== '') filters[name] = value;
  }
  const band = String(form.get('band') ?? '');
  if (band === 'errors' || band === 'slow') filters.band = band;
  return filters;
}

function Status({ log }: { log: RequestLog }) {
  const failed = log.status >= 400;
  return (
    <span class={failed ? 'status status-revoked' : 'status'}>
      {log.status}
      {log.errorCode ? <span class="muted"> {log.errorCode}</span> : null}
    </span>
  );
}

/**
 * The gateway's request log (`GET /client/requests`): the spec's filters, newest first, a page at a
 * time by the API's cursor. The cursor belongs to the filters it was given with, so changing a filter
 * starts again from the first page.
 */
export function RequestsPage() {
  const [keys, setKeys] = useState<readonly Key[]>([]);
  const [filters, setFilters] = useState<Filters>({ limit: PAGE_SIZES[1] });
  const [rows, setRows] = useState<readonly RequestLog[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    api
      .GET('/keys', { params: { query: { limit: 200 } } })
      .then((result) => setKeys(unwrap(result).data))
      .catch(() => undefined);
  }, []);
  const load = async (query: Filters, after: string | null) => {
    setBusy(true);
    try {
      const page = unwrap(await api.GET('/requests', { params: { query: after === null ? query : { ...query, cursor: after } } }));
      setRows((shown) => (after === null || shown === null ? page.data : [...shown, ...page.data]));
      setCursor(page.nextCursor);
      setErrors(NO_ERRORS);
    } catch (error) {
      setErrors(formErrorsOf(error, FILTER_FIELDS));
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => void load(filters, null), [filters]);
  const keyNames = new Map(keys.map((key) => [key.id, key.name]));
  return (
    <section>
      <h1>Request logs</h1>
      <form
        class="filters"
        aria-label="Filters"
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          setRows(null);
          setFilters(filtersOf(new FormData(event.currentTarget)));
        }}
      >
        <Field id="log-from" label="From (your time zone)" error={errors.fields.from}>
          <input id="log-from" name="from" type="datetime-local" aria-describedby={describedBy('log-from', null, errors.fields.from)} />
        </Field>
        <Field id="log-to" label="To (your time zone)" error={errors.fields.to}>
          <input id="log-to" name="to" type="datetime-local" aria-describedby={describedBy('log-to', null, errors.fields.to)} />
        </Field>
        <Field id="log-key" label="Key" error={errors.fields.keyId}>
          <select id="log-key" name="keyId" aria-describedby={describedBy('log-key', null, errors.fields.keyId)}>
            <option value="">every key</option>
            {keys.map((key) => (
              <option key={key.id} value={key.id}>
                {key.name}
              </option>
            ))}
          </select>
        </Field>
        <Field id="log-model" label="Model (exact)" error={errors.fields.model}>
          <input id="log-model" name="model" aria-describedby={describedBy('log-model', null, errors.fields.model)} />
        </Field>
        <Field id="log-q" label="Search" hint="A request id, or text in the model or endpoint" error={errors.fields.q}>
          <input id="log-q" name="q" type="search" aria-describedby={describedBy('log-q', 'hint', errors.fields.q)} />
        </Field>
        <Field id="log-band" label="Only" error={errors.fields.band}>
          <select id="log-band" name="band">
            <option value="">every call</option>
            <option value="errors">errors (status 400 or above)</option>
            <option value="slow">slow calls</option>
          </select>
        </Field>
        <Field id="log-limit" label="Rows per page" error={errors.fields.limit}>
          <select id="log-limit" name="limit">
            {PAGE_SIZES.map((size) => (
              // `selected`, not the select's defaultValue, which Preact sets as an attribute that selects nothing.
              <option key={size} value={String(size)} selected={size === PAGE_SIZES[1]}>
                {size}
              </option>
            ))}
          </select>
        </Field>
        <div class="field filters-submit">
          <button type="submit" disabled={busy}>
            Apply filters
          </button>
        </div>
      </form>
      <FormError message={errors.form} />
      {rows === null ? (
        errors.form ? null : (
          <Loading what="requests" />
        )
      ) : rows.length === 0 ? (
        <p role="status">No requests match.</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="request-table">
            <caption>
              {count(rows.length)} request{rows.length === 1 ? '' : 's'} shown, newest first{cursor ? '; more below' : ''}
            </caption>
            <thead>
              <tr>
                <th scope="col">Time</th>
                <th scope="col">Status</th>
                <th scope="col">Endpoint</th>
                <th scope="col">Model</th>
                <th scope="col">Key</th>
                <th scope="col">Tokens in / out</th>
                <th scope="col">Cost</th>
                <th scope="col">Latency</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((log) => (
                <tr key={log.id} data-request-id={log.id}>
                  <td>
                    <a href={`/console/requests/${encodeURIComponent(log.id)}`}>
                      <Time iso={log.createdAt} />
                    </a>
                  </td>
                  <td>
                    <Status log={log} />
                  </td>
                  <td class="mono">{log.endpoint}</td>
                  <td>{log.model ?? '—'}</td>
                  <td>{log.keyId === null ? '—' : (keyNames.get(log.keyId) ?? log.keyId)}</td>
                  <td>
                    {count(log.tokens.input)} / {count(log.tokens.output)}
                    {log.tokens.estimated ? <span class="muted"> (estimated)</span> : null}
                  </td>
                  <td>{usd(log.costUsd)}</td>
                  <td>{count(log.latencyMs)} ms</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {rows !== null && cursor !== null ? (
        <div class="actions">
          <button type="button" disabled={busy} onClick={() => void load(filters, cursor)}>
            More
          </button>
        </div>
      ) : null}
    </section>
  );
}

const HIDDEN_BECAUSE: Record<NonNullable<RequestLogDetail['bodiesHidden']>, string> = {
  role: 'Your role may not read this call’s prompt and response.',
  not_logged: 'Request logging was off for this call: its prompt and response were not kept.',
};

function Body({ title, value }: { title: string; value: unknown }) {
  return (
    <>
      <h2>{title}</h2>
      <pre class="body mono">{JSON.stringify(value, null, 2)}</pre>
    </>
  );
}

/** One call in full: its figures, and its bodies only where the API returns them (it says why not). */
export function RequestDetailPage() {
  const { params } = useRoute();
  const id = params.id ?? '';
  const [log, setLog] = useState<RequestLogDetail | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    api
      .GET('/requests/{id}', { params: { path: { id } } })
      .then((result) => setLog(unwrap(result)))
      .catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  }, [id]);
  const back = (
    <p>
      <a href="/console/requests">← Request logs</a>
    </p>
  );
  if (failure)
    return (
      <section>
        {back}
        <p role="alert">{failure}</p>
      </section>
    );
  if (log === null) return <Loading what="the request" />;
  const tokens = log.tokens;
  return (
    <section>
      {back}
      <h1>
        Request <span class="mono">{log.id}</span>
      </h1>
      <dl class="details">
        <dt>Time</dt>
        <dd>
          <Time iso={log.createdAt} />
        </dd>
        <dt>Status</dt>
        <dd>
          <Status log={log} />
        </dd>
        <dt>Endpoint</dt>
        <dd class="mono">{log.endpoint}</dd>
        <dt>Model</dt>
        <dd>
          {log.model ?? '—'}
          {log.provider ? ` via ${log.provider}${log.upstreamModel ? ` (${log.upstreamModel})` : ''}` : ''}
        </dd>
        <dt>Key</dt>
        <dd>{log.keyId ? <a href={`/console/keys/${log.keyId}`}>{log.keyId}</a> : '—'}</dd>
        <dt>Tokens</dt>
        <dd>
          {count(tokens.input)} in ({count(tokens.cachedInput)} cached, {count(tokens.cacheWrite)} cache writes), {count(tokens.output)} out ({count(tokens.reasoning)} reasoning)
          {tokens.estimated ? ', estimated by the gateway' : ''}
        </dd>
        <dt>Cost</dt>
        <dd>{usd(log.costUsd)}</dd>
        <dt>Latency</dt>
        <dd>
          {count(log.latencyMs)} ms{log.ttftMs === null ? '' : `, first token after ${count(log.ttftMs)} ms`}
          {log.streamed ? ' (streamed)' : ''}, {count(log.attempts)} attempt{log.attempts === 1 ? '' : 's'}
        </dd>
        {log.batchId ? (
          <>
            <dt>Batch</dt>
            <dd class="mono">{log.batchId}</dd>
          </>
        ) : null}
      </dl>
      {log.bodiesHidden ? (
        <p class="hint" data-testid="bodies-hidden">
          {HIDDEN_BECAUSE[log.bodiesHidden]}
        </p>
      ) : (
        <>
          <Body title="Request body" value={log.request} />
          <Body title="Response body" value={log.response} />
        </>
      )}
    </section>
  );
}
