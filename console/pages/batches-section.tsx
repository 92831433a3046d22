import { useEffect, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import { unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { session } from '../api/session.ts';
import { count, usd } from '../format.ts';
import { served } from '../layout.tsx';
import { may } from '../permissions.ts';
import { Loading, Time } from '../ui.tsx';
import { useVisiblePolling } from '../visible-polling.ts';

type Batch = components['schemas']['ManagedBatch'];

/** While one of these shows, the list is refreshed: its counts still move. */
const RUNNING: ReadonlySet<Batch['status']> = new Set(['validating', 'in_progress', 'finalizing', 'cancelling']);
const ENDED: ReadonlySet<Batch['status']> = new Set(['completed', 'failed', 'cancelled', 'expired']);
const POLL_MS = 3_000;

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** Mounted only while a batch runs: the page asks again every few seconds, and only while it is visible. */
function WhileRunning({ refresh }: { refresh: () => Promise<unknown> }) {
  useVisiblePolling(refresh, POLL_MS);
  return null;
}

function Progress({ batch }: { batch: Batch }) {
  const { total, completed, failed } = batch.requestCounts;
  const done = completed + failed;
  const label = `${count(done)} of ${count(total)} requests done${failed ? `, ${count(failed)} failed` : ''}`;
  return (
    <div class="progress">
      <progress value={done} max={Math.max(total, 1)} aria-label={`Progress of batch ${batch.id}`} aria-valuetext={label} />
      <span data-testid="batch-counts">{label}</span>
    </div>
  );
}

/**
 * The output file as a download: asked for as bytes (`Accept: application/octet-stream`, with the
 * session's cookie), then handed to the browser under its own name.
 */
async function downloadOutput(batch: Batch): Promise<void> {
  const answer = await api.GET('/batches/{id}/output', { params: { path: { id: batch.id } }, headers: { accept: 'application/octet-stream' }, parseAs: 'blob' });
  const blob = unwrap(answer) as unknown as Blob;
  const disposition = answer.response.headers.get('content-disposition') ?? '';
  const filename = /filename="([^"]+)"/.exec(disposition)?.[1] ?? `batch_${batch.id}_output.jsonl`;
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  // The download has taken the bytes by the next task.
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

/** Batches of /v1 calls (`GET /batches`): progress, status, output download, cancel. */
export function BatchesSection() {
  const caller = session.value!;
  const output = may(caller, 'requests.read');
  const cancel = may(caller, 'batches.cancel');
  const mayCancel = served.value.has('POST /batches/{id}/cancel');
  const [batches, setBatches] = useState<readonly Batch[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const load = () =>
    api
      .GET('/batches', { params: { query: { limit: 50 } } })
      .then((result) => {
        setBatches(unwrap(result).data);
        setFailure(null);
      })
      .catch((error: unknown) => setFailure(messageOf(error)));
  useEffect(() => void load(), []);
  const running = batches?.some((batch) => RUNNING.has(batch.status)) ?? false;
  const download = (batch: Batch) => void downloadOutput(batch).catch((error: unknown) => setFailure(messageOf(error)));
  const stop = async (batch: Batch) => {
    if (!confirm(`Cancel batch ${batch.id}? Requests not yet started will not run; those running finish and are billed.`)) return;
    try {
      unwrap(await api.POST('/batches/{id}/cancel', { params: { path: { id: batch.id } } }));
      setNotice(`Batch cancelling: ${batch.id}`);
      await load();
    } catch (error) {
      setFailure(messageOf(error));
    }
  };
  return (
    <section aria-labelledby="batches-title">
      <h2 id="batches-title">Batches</h2>
      <p class="hint">Files of /v1 calls run in the background at batch prices (POST /v1/batches with an API key). Newest first; refreshed while one runs.</p>
      {output.allowed ? null : (
        <p class="hint" id="batch-output-reason">
          {output.reason}
        </p>
      )}
      {cancel.allowed || !mayCancel ? null : (
        <p class="hint" id="batch-cancel-reason">
          {cancel.reason}
        </p>
      )}
      {failure ? <p role="alert">{failure}</p> : null}
      {notice ? <p role="status">{notice}</p> : null}
      {running ? <WhileRunning refresh={load} /> : null}
      {batches === null ? (
        failure ? null : (
          <Loading what="batches" />
        )
      ) : batches.length === 0 ? (
        <p>No batches yet.</p>
      ) : (
        <div class="table-wrap">
          <table data-testid="batch-table">
            <caption class="visually-hidden">Batches, newest first, with their progress</caption>
            <thead>
              <tr>
                <th scope="col">Created</th>
                <th scope="col">Status</th>
                <th scope="col">Progress</th>
                <th scope="col">Models</th>
                <th scope="col">Key / project</th>
                <th scope="col">Held</th>
                <th scope="col">Output</th>
              </tr>
            </thead>
            <tbody>
              {batches.map((batch) => (
                <tr key={batch.id} data-batch-id={batch.id} data-status={batch.status}>
                  <td>
                    <Time iso={batch.createdAt} />
                  </td>
                  <td>{batch.status.replace('_', ' ')}</td>
                  <td>
                    <Progress batch={batch} />
                  </td>
                  <td class="mono">{batch.models.join(', ') || '—'}</td>
                  <td class="mono">
                    <span title="API key">{batch.keyId.slice(0, 8)}</span> / <span title="Project">{batch.projectId.slice(0, 8)}</span>
                  </td>
                  <td>{batch.heldUsd === null ? '—' : usd(batch.heldUsd)}</td>
                  <td class="actions">
                    {ENDED.has(batch.status) ? (
                      <button
                        type="button"
                        disabled={!output.allowed}
                        aria-describedby={output.allowed ? undefined : 'batch-output-reason'}
                        aria-label={`Download the output of batch ${batch.id}`}
                        onClick={() => download(batch)}
                      >
                        Download output
                      </button>
                    ) : null}
                    {mayCancel && batch.status === 'in_progress' ? (
                      <button
                        type="button"
                        class="danger"
                        disabled={!cancel.allowed}
                        aria-describedby={cancel.allowed ? undefined : 'batch-cancel-reason'}
                        aria-label={`Cancel batch ${batch.id}`}
                        onClick={() => void stop(batch)}
                      >
                        Cancel
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
