import { useEffect, useState } from 'preact/hooks';
import { useLocation, useRoute } from 'preact-iso';
import { api } from '../api/client.ts';
import { type FormErrors, formErrorsOf, NO_ERRORS, unwrap } from '../api/errors.ts';
import type { components, operations } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { useCursorList } from '../cursor-list.ts';
import { count } from '../format.ts';
import { may } from '../permissions.ts';
import { useProjects } from '../projects.ts';
import { describedBy, Field, FormError, Loading, ShownOnceDialog, TableRegion, Time } from '../ui.tsx';
import { useVisiblePolling } from '../visible-polling.ts';

type Endpoint = components['schemas']['WebhookEndpoint'];
type Delivery = components['schemas']['WebhookDelivery'];
type EventType = components['schemas']['EventType'];
type CreateBody = operations['webhooks.create']['requestBody']['content']['application/json'];
type UpdateBody = operations['webhooks.update']['requestBody']['content']['application/json'];

/** Every public type, those declared later included: the API's `["*"]`. */
const EVERY_TYPE = '*';
const PAGE = 50;
/** How often the deliveries are asked for while the page is visible (a resend's attempts come from the workers). */
const DELIVERIES_POLL_MS = 3_000;
/** The fields of the endpoint forms, as the API's `param` names them. */
const ENDPOINT_FIELDS = ['url', 'description', 'eventTypes', 'projectId'] as const;

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The catalogue (`GET /events/types`), once per page. */
function useEventTypes(): { types: readonly EventType[] | null; failure: string | null } {
  const [types, setTypes] = useState<readonly EventType[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    api
      .GET('/events/types')
      .then((result) => setTypes(unwrap(result).data))
      .catch((error: unknown) => setFailure(messageOf(error)));
  }, []);
  return { types, failure };
}

/** The event types to subscribe to, chosen from the catalogue, or every type (`*`). */
function EventTypesField({ errors, chosen, idPrefix }: { errors: FormErrors; chosen: readonly string[]; idPrefix: string }) {
  const { types, failure } = useEventTypes();
  const [every, setEvery] = useState(chosen.includes(EVERY_TYPE));
  const errorId = `${idPrefix}-types-error`;
  return (
    <fieldset aria-describedby={errors.fields.eventTypes ? errorId : undefined}>
      <legend>Event types</legend>
      <label class="check">
        <input type="checkbox" name="eventTypes" value={EVERY_TYPE} checked={every} onChange={(event) => setEvery(event.currentTarget.checked)} /> Every event type, those added later
        included
      </label>
      {failure ? <p role="alert">{failure}</p> : null}
      {types === null ? (
        failure ? null : (
          <Loading what="event types" />
        )
      ) : (
        <div class="checks wide">
          {types.map((type) => (
            <label key={type.type} class="check" title={type.description}>
              <input type="checkbox" name="eventTypes" value={type.type} disabled={every} defaultChecked={chosen.includes(type.type)} /> <span class="mono">{type.type}</span>
            </label>
          ))}
        </div>
      )}
      {errors.fields.eventTypes ? (
        <p class="error" id={errorId} role="alert">
          {errors.fields.eventTypes}
        </p>
      ) : null}
    </fieldset>
  );
}

/** The chosen types as the API takes them: `["*"]` alone when every type is chosen. */
function eventTypesOf(form: FormData): string[] {
  const chosen = form.getAll('eventTypes').map(String);
  return chosen.includes(EVERY_TYPE) ? [EVERY_TYPE] : chosen;
}

function UrlAndDescription({ errors, current, idPrefix }: { errors: FormErrors; current?: Endpoint; idPrefix: string }) {
  const url = `${idPrefix}-url`;
  const description = `${idPrefix}-description`;
  const urlHint = 'https, on a public address; redirects are not followed';
  return (
    <>
      <Field id={url} label="URL" hint={urlHint} error={errors.fields.url}>
        <input id={url} name="url" type="url" required maxLength={2048} defaultValue={current?.url ?? ''} aria-describedby={describedBy(url, urlHint, errors.fields.url)} />
      </Field>
      <Field id={description} label="Description (optional)" error={errors.fields.description}>
        <input id={description} name="description" maxLength={500} defaultValue={current?.description ?? ''} aria-describedby={describedBy(description, null, errors.fields.description)} />
      </Field>
    </>
  );
}

function CreateEndpointForm({ onCreated }: { onCreated: (secret: string) => void }) {
  const write = may(session.value!, 'webhooks.write');
  const projects = useProjects();
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [busy, setBusy] = useState(false);
  // Counts endpoints made here: the event types start afresh after each, "every type" included.
  const [made, setMade] = useState(0);
  const submit = async (event: SubmitEvent) => {
    event.preventDefault();
    const element = event.currentTarget as HTMLFormElement;
    const form = new FormData(element);
    const projectId = String(form.get('projectId') ?? '');
    const body: CreateBody = {
      url: String(form.get('url')),
      description: String(form.get('description') ?? ''),
      eventTypes: eventTypesOf(form),
      ...(projectId === '' ? {} : { projectId }),
    };
    setBusy(true);
    try {
      const created = unwrap(await api.POST('/webhooks', { body }));
      element.reset();
      setMade((n) => n + 1);
      setErrors(NO_ERRORS);
      onCreated(created.secret);
    } catch (error) {
      setErrors(formErrorsOf(error, ENDPOINT_FIELDS));
    } finally {
      setBusy(false);
    }
  };
  const projectHint = 'The whole organisation gets every event; a project only its own';
  return (
    <form class="card" onSubmit={(event) => void submit(event)} noValidate aria-labelledby="create-webhook-title">
      <h2 id="create-webhook-title">Add an endpoint</h2>
      {write.allowed ? null : <p class="hint">{write.reason}</p>}
      <fieldset disabled={!write.allowed || busy}>
        <FormError message={errors.form} />
        <UrlAndDescription errors={errors} idPrefix="new-webhook" />
        <Field id="new-webhook-project" label="Events of" hint={projectHint} error={errors.fields.projectId}>
          <select id="new-webhook-project" name="projectId" aria-describedby={describedBy('new-webhook-project', projectHint, errors.fields.projectId)}>
            <option value="">the whole organisation</option>
            {[...projects].map(([id, name]) => (
              <option key={id} value={id}>
                project {name}
              </option>
            ))}
          </select>
        </Field>
        <EventTypesField key={made} errors={errors} chosen={[]} idPrefix="new-webhook" />
        <button type="submit">Add endpoint</button>
      </fieldset>
    </form>
  );
}

function EndpointStatus({ endpoint }: { endpoint: Endpoint }) {
  return <span class={endpoint.enabled ? 'status' : 'status status-revoked'}>{endpoint.enabled ? 'on' : 'off'}</span>;
}

export function WebhooksPage() {
  const [secret, setSecret] = useState<string | null>(null);
  const projects = useProjects();
  const list = useCursorList<Endpoint>(async (cursor) => unwrap(await api.GET('/webhooks', { params: { query: { limit: PAGE, ...(cursor ? { cursor } : {}) } } })), 'webhooks');
  return (
    <section>
      <h1>Webhooks</h1>
      {list.failure ? <p role="alert">{list.failure}</p> : null}
      {list.items === null ? (
        list.failure ? null : (
          <Loading what="webhook endpoints" />
        )
      ) : list.items.length === 0 ? (
        <p>No webhook endpoints yet.</p>
      ) : (
        <TableRegion label="Webhook endpoints, newest first">
          <table>
            <caption class="visually-hidden">Webhook endpoints, newest first</caption>
            <thead>
              <tr>
                <th scope="col">URL</th>
                <th scope="col">Status</th>
                <th scope="col">Event types</th>
                <th scope="col">Events of</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((endpoint) => (
                <tr key={endpoint.id}>
                  <td class="wrap">
                    <a href={`/console/webhooks/${endpoint.id}`} class="mono">
                      {endpoint.url}
                    </a>
                    {endpoint.description ? <p class="hint">{endpoint.description}</p> : null}
                  </td>
                  <td>
                    <EndpointStatus endpoint={endpoint} />
                  </td>
                  <td>{endpoint.eventTypes.join(', ')}</td>
                  <td>{endpoint.projectId === null ? 'the organisation' : (projects.get(endpoint.projectId) ?? endpoint.projectId)}</td>
                  <td>
                    <Time iso={endpoint.createdAt} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
      {list.hasMore ? (
        <button type="button" onClick={() => void list.more()}>
          More endpoints
        </button>
      ) : null}
      <CreateEndpointForm
        onCreated={(made) => {
          setSecret(made);
          void list.reload();
        }}
      />
      {secret ? <ShownOnceDialog title="Endpoint added" label="Signing secret" secret={secret} onClose={() => setSecret(null)} /> : null}
    </section>
  );
}

/** The latest attempt's answer in a few words: the status code, else why no answer came. */
function lastAnswer(delivery: Delivery): string {
  const last = delivery.attempts[0];
  if (!last) return 'not tried yet';
  if (last.statusCode !== null) return `${last.statusCode} in ${count(last.durationMs)} ms`;
  return `${last.errorKind ?? 'failed'}: ${last.error ?? ''}`;
}

function DeliveryRow({ delivery, endpoint, onResent }: { delivery: Delivery; endpoint: Endpoint; onResent: (delivery: Delivery) => void }) {
  const write = may(session.value!, 'webhooks.write');
  const [failure, setFailure] = useState<string | null>(null);
  // The API's rules for a resend, told before it is asked: the endpoint on, the delivery finished.
  const reason = !write.allowed ? write.reason : !endpoint.enabled ? 'The endpoint is off: switch it on to resend' : delivery.status === 'pending' ? 'Still being attempted' : null;
  const reasonId = `delivery-${delivery.id}-reason`;
  const resend = async () => {
    try {
      onResent(unwrap(await api.POST('/webhooks/{id}/deliveries/{deliveryId}/resend', { params: { path: { id: endpoint.id, deliveryId: delivery.id } } })));
      setFailure(null);
    } catch (error) {
      setFailure(messageOf(error));
    }
  };
  return (
    <tr>
      <td>
        <span class="mono">{delivery.eventType}</span>
        {delivery.test ? <span class="muted"> (test)</span> : null}
        <br />
        <span class="muted">
          made <Time iso={delivery.createdAt} />
        </span>
      </td>
      <td>
        <span class={`status status-${delivery.status}`}>{delivery.status}</span>
      </td>
      <td>{count(delivery.attemptCount)}</td>
      <td class="wrap">
        {lastAnswer(delivery)}
        {delivery.attempts.length > 0 ? (
          <details>
            <summary>
              Attempts<span class="visually-hidden"> of delivery {delivery.messageId}</span>
            </summary>
            <ol class="attempts">
              {delivery.attempts.map((attempt) => (
                <li key={attempt.attempt} value={attempt.attempt}>
                  <Time iso={attempt.attemptedAt} />: {attempt.outcome}
                  {attempt.statusCode === null ? '' : `, ${attempt.statusCode}`}, {count(attempt.durationMs)} ms
                  {attempt.error ? `, ${attempt.error}` : ''}
                  {attempt.nextAttemptAt ? (
                    <>
                      ; next <Time iso={attempt.nextAttemptAt} />
                    </>
                  ) : null}
                </li>
              ))}
            </ol>
          </details>
        ) : null}
      </td>
      <td>
        <button type="button" disabled={reason !== null} aria-describedby={reason ? reasonId : undefined} onClick={() => void resend()}>
          Resend<span class="visually-hidden"> delivery {delivery.messageId}</span>
        </button>
        {reason ? (
          <p class="hint" id={reasonId}>
            {reason}
          </p>
        ) : null}
        {failure ? (
          <p class="error" role="alert">
            {failure}
          </p>
        ) : null}
      </td>
    </tr>
  );
}

function Deliveries({ endpoint, refresh }: { endpoint: Endpoint; refresh: number }) {
  const id = endpoint.id;
  const list = useCursorList<Delivery>(
    async (cursor) => unwrap(await api.GET('/webhooks/{id}/deliveries', { params: { path: { id }, query: { limit: PAGE, ...(cursor ? { cursor } : {}) } } })),
    id,
    false,
  );
  // Only while the page is visible; a hidden tab asks nothing (visible-polling.ts).
  useVisiblePolling(list.reload, DELIVERIES_POLL_MS);
  useEffect(() => {
    if (refresh > 0) void list.reload();
  }, [refresh]);
  if (list.items === null) return list.failure ? <p role="alert">{list.failure}</p> : <Loading what="deliveries" />;
  return (
    <>
      {list.failure ? <p role="alert">{list.failure}</p> : null}
      {list.items.length === 0 ? (
        <p>No deliveries yet.</p>
      ) : (
        <TableRegion label="Deliveries to this endpoint, newest first">
          <table data-testid="deliveries">
            <caption class="visually-hidden">Deliveries to this endpoint, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Event type</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last answer</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.items.map((delivery) => (
                <DeliveryRow key={delivery.id} delivery={delivery} endpoint={endpoint} onResent={list.replace} />
              ))}
            </tbody>
          </table>
        </TableRegion>
      )}
      {list.hasMore ? (
        <button type="button" onClick={() => void list.more()}>
          More deliveries
        </button>
      ) : null}
    </>
  );
}

export function WebhookDetailPage() {
  const { params } = useRoute();
  const { route } = useLocation();
  const id = params.id ?? '';
  const projects = useProjects();
  const [endpoint, setEndpoint] = useState<Endpoint | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [errors, setErrors] = useState<FormErrors>(NO_ERRORS);
  const [notice, setNotice] = useState<string | null>(null);
  const [secret, setSecret] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  // Bumped after a test delivery, so the deliveries are asked for at once rather than at the next poll.
  const [sent, setSent] = useState(0);
  useEffect(() => {
    api
      .GET('/webhooks/{id}', { params: { path: { id } } })
      .then((result) => setEndpoint(unwrap(result)))
      .catch((error: unknown) => setFailure(messageOf(error)));
  }, [id]);
  const write = may(session.value!, 'webhooks.write');

  const act = async (work: () => Promise<string>, fields: readonly string[] = []) => {
    setBusy(true);
    try {
      const said = await work();
      setErrors(NO_ERRORS);
      setNotice(said);
    } catch (error) {
      setNotice(null);
      setErrors(formErrorsOf(error, fields));
    } finally {
      setBusy(false);
    }
  };
  const patch = (body: UpdateBody, said: string, fields: readonly string[] = []) =>
    act(async () => {
      setEndpoint(unwrap(await api.PATCH('/webhooks/{id}', { params: { path: { id } }, body })));
      return said;
    }, fields);
  const sendTest = () =>
    act(async () => {
      const result = unwrap(await api.POST('/webhooks/{id}/test', { params: { path: { id } } }));
      setSent((n) => n + 1);
      return result.succeeded
        ? `Test event delivered: ${result.statusCode} in ${count(result.durationMs)} ms`
        : `Test event failed: ${result.statusCode === null ? (result.error ?? result.errorKind) : `${result.statusCode} in ${count(result.durationMs)} ms`}`;
    });
  const rotate = (overlapSeconds: number) =>
    act(async () => {
      const rotated = unwrap(await api.POST('/webhooks/{id}/secret/rotate', { params: { path: { id } }, body: overlapSeconds > 0 ? { overlapSeconds } : {} }));
      setSecret(rotated.secret);
      setEndpoint(unwrap(await api.GET('/webhooks/{id}', { params: { path: { id } } })));
      return rotated.previousSecretExpiresAt ? 'Secret rotated; the previous one signs too until the overlap ends' : 'Secret rotated; the previous one no longer signs';
    }, ['overlapSeconds']);
  const remove = () =>
    act(async () => {
      unwrap(await api.DELETE('/webhooks/{id}', { params: { path: { id } } }));
      route('/console/webhooks');
      return 'Endpoint deleted';
    });

  if (failure) return <p role="alert">{failure}</p>;
  if (endpoint === null) return <Loading what="the endpoint" />;
  const off = write.allowed ? null : write.reason;
  return (
    <section>
      <p>
        <a href="/console/webhooks">← Webhooks</a>
      </p>
      <h1 class="wrap mono">{endpoint.url}</h1>
      <dl class="details">
        <dt>Status</dt>
        <dd>
          <EndpointStatus endpoint={endpoint} />
          {endpoint.disabledReason ? <span class="muted"> ({endpoint.disabledReason})</span> : null}
        </dd>
        <dt>Description</dt>
        <dd>{endpoint.description || '—'}</dd>
        <dt>Event types</dt>
        <dd>{endpoint.eventTypes.join(', ')}</dd>
        <dt>Events of</dt>
        <dd>{endpoint.projectId === null ? 'the whole organisation' : `project ${projects.get(endpoint.projectId) ?? endpoint.projectId}`}</dd>
        <dt>Secret rotated</dt>
        <dd>
          <Time iso={endpoint.secretRotatedAt} />
          {endpoint.previousSecretExpiresAt ? (
            <>
              {' '}
              (the previous one signs until <Time iso={endpoint.previousSecretExpiresAt} />)
            </>
          ) : null}
        </dd>
        <dt>Created</dt>
        <dd>
          <Time iso={endpoint.createdAt} />
        </dd>
      </dl>
      <p role="status">{notice}</p>
      <FormError message={errors.form} />

      <h2>Act</h2>
      {off ? <p class="hint">{off}</p> : null}
      <div class="card actions">
        <button type="button" disabled={off !== null || busy} onClick={() => void sendTest()}>
          Send a test event
        </button>
        <button type="button" disabled={off !== null || busy} onClick={() => void patch({ enabled: !endpoint.enabled }, endpoint.enabled ? 'Endpoint switched off' : 'Endpoint switched on')}>
          {endpoint.enabled ? 'Switch off' : 'Switch on'}
        </button>
        <button
          type="button"
          class="danger"
          disabled={off !== null || busy}
          onClick={() => confirm('Delete this endpoint with its deliveries? Nothing more is sent to it.') && void remove()}
        >
          Delete endpoint
        </button>
      </div>
      <form
        class="card"
        aria-labelledby="rotate-title"
        onSubmit={(event) => {
          event.preventDefault();
          void rotate(Number(new FormData(event.currentTarget).get('overlapSeconds') || 0));
        }}
      >
        <h3 id="rotate-title">Signing secret</h3>
        <fieldset disabled={off !== null || busy}>
          <Field id="overlap" label="Keep the previous secret signing for (seconds, at most 86400)" error={errors.fields.overlapSeconds}>
            <input
              id="overlap"
              name="overlapSeconds"
              type="number"
              min="0"
              max="86400"
              step="1"
              defaultValue="0"
              aria-describedby={describedBy('overlap', null, errors.fields.overlapSeconds)}
            />
          </Field>
          <button type="submit">Rotate secret</button>
        </fieldset>
      </form>
      <form
        class="card"
        aria-labelledby="change-title"
        noValidate
        onSubmit={(event) => {
          event.preventDefault();
          const form = new FormData(event.currentTarget);
          void patch({ url: String(form.get('url')), description: String(form.get('description') ?? ''), eventTypes: eventTypesOf(form) }, 'Endpoint saved', ENDPOINT_FIELDS);
        }}
      >
        <h3 id="change-title">Change</h3>
        <fieldset disabled={off !== null || busy}>
          <UrlAndDescription errors={errors} current={endpoint} idPrefix="webhook" />
          <EventTypesField key={endpoint.updatedAt} errors={errors} chosen={endpoint.eventTypes} idPrefix="webhook" />
          <button type="submit">Save</button>
        </fieldset>
      </form>

      <h2>Deliveries</h2>
      <Deliveries endpoint={endpoint} refresh={sent} />
      {secret ? <ShownOnceDialog title="New signing secret" label="Signing secret" secret={secret} onClose={() => setSecret(null)} /> : null}
    </section>
  );
}
