import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api } from '../api/client.ts';
import { unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { count, microsOf, usdExact } from '../format.ts';
import { Loading, Time } from '../ui.tsx';

type Series = components['schemas']['UsageSeries'];
type Key = components['schemas']['Key'];

const reducedMotion = () => matchMedia('(prefers-reduced-motion: reduce)').matches;

/** One uPlot chart of one measure over the buckets, oldest first as a time axis reads. */
function Chart({ title, buckets, measure }: { title: string; buckets: Series['buckets']; measure: (bucket: Series['buckets'][number]) => number }) {
  const holder = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = holder.current;
    if (!element) return;
    const ordered = [...buckets].reverse();
    const data: uPlot.AlignedData = [ordered.map((bucket) => Date.parse(bucket.start) / 1000), ordered.map(measure)];
    const width = Math.max(280, element.clientWidth);
    const plot = new uPlot(
      { width, height: 220, series: [{}, { label: title, stroke: 'currentColor', width: 2 }], legend: { show: false }, cursor: { drag: { x: !reducedMotion() } } },
      data,
      element,
    );
    return () => plot.destroy();
  }, [buckets, measure, title]);
  return <div class="chart" ref={holder} role="img" aria-label={`${title} per bucket; the table below lists the same data`} />;
}

const cost = (bucket: Series['buckets'][number]) => bucket.costUsd;

/** The table's total row: summed in micro-dollars, so it equals the ledger's charges exactly. */
function totalsOf(buckets: Series['buckets']) {
  return buckets.reduce(
    (sum, bucket) => ({
      requests: sum.requests + bucket.requests,
      errors: sum.errors + bucket.errors,
      input: sum.input + bucket.tokens.input,
      output: sum.output + bucket.tokens.output,
      costMicros: sum.costMicros + microsOf(bucket.costUsd),
    }),
    { requests: 0, errors: 0, input: 0, output: 0, costMicros: 0 },
  );
}
const requests = (bucket: Series['buckets'][number]) => bucket.requests;

function UsageTotals({ buckets }: { buckets: Series['buckets'] }) {
  const totals = totalsOf(buckets);
  return (
    <tfoot>
      <tr data-testid="usage-totals">
        <th scope="row">Total</th>
        <td>{count(totals.requests)}</td>
        <td>{count(totals.errors)}</td>
        <td>{count(totals.input)}</td>
        <td>{count(totals.output)}</td>
        <td>{usdExact(totals.costMicros / 1_000_000)}</td>
      </tr>
    </tfoot>
  );
}

/** Usage over time from `/client/usage/series`, each chart with the table of its data. */
export function UsagePage() {
  const [granularity, setGranularity] = useState<'hour' | 'day'>('day');
  const [keyId, setKeyId] = useState('');
  const [keys, setKeys] = useState<readonly Key[]>([]);
  const [series, setSeries] = useState<Series | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    api
      .GET('/keys', { params: { query: { limit: 200 } } })
      .then((result) => setKeys(unwrap(result).data))
      .catch(() => undefined);
  }, []);
  useEffect(() => {
    const to = new Date();
    const from = new Date(to.getTime() - (granularity === 'hour' ? 2 : 30) * 86_400_000);
    setSeries(null);
    api
      .GET('/usage/series', { params: { query: { granularity, from: from.toISOString(), to: to.toISOString(), ...(keyId ? { keyId } : {}) } } })
      .then((result) => {
        setFailure(null);
        setSeries(unwrap(result));
      })
      .catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  }, [granularity, keyId]);
  return (
    <section>
      <h1>Usage</h1>
      <form class="filters" onSubmit={(event) => event.preventDefault()}>
        <div class="field">
          <label for="granularity">Buckets</label>
          <select id="granularity" value={granularity} onChange={(event) => setGranularity(event.currentTarget.value as 'hour' | 'day')}>
            <option value="day">days (last 30)</option>
            <option value="hour">hours (last 48)</option>
          </select>
        </div>
        <div class="field">
          <label for="usage-key">Key</label>
          <select id="usage-key" value={keyId} onChange={(event) => setKeyId(event.currentTarget.value)}>
            <option value="">every key</option>
            {keys.map((key) => (
              <option key={key.id} value={key.id}>
                {key.name}
              </option>
            ))}
          </select>
        </div>
      </form>
      {failure ? <p role="alert">{failure}</p> : null}
      {series === null ? (
        failure ? null : (
          <Loading what="usage" />
        )
      ) : (
        <>
          <h2>Cost (USD)</h2>
          <Chart title="Cost (USD)" buckets={series.buckets} measure={cost} />
          <h2>Requests</h2>
          <Chart title="Requests" buckets={series.buckets} measure={requests} />
          <div class="table-wrap">
            <table data-testid="usage-table">
              <caption>Usage per {series.granularity} (UTC buckets, newest first; cost to the micro-dollar)</caption>
              <thead>
                <tr>
                  <th scope="col">Start</th>
                  <th scope="col">Requests</th>
                  <th scope="col">Errors</th>
                  <th scope="col">Input tokens</th>
                  <th scope="col">Output tokens</th>
                  <th scope="col">Cost</th>
                </tr>
              </thead>
              <tbody>
                {series.buckets
                  .filter((bucket) => bucket.requests > 0)
                  .map((bucket) => (
                    <tr key={bucket.start} data-start={bucket.start} data-cost-usd={String(bucket.costUsd)}>
                      <td>
                        <Time iso={bucket.start} />
                      </td>
                      <td>{count(bucket.requests)}</td>
                      <td>{count(bucket.errors)}</td>
                      <td>{count(bucket.tokens.input)}</td>
                      <td>{count(bucket.tokens.output)}</td>
                      <td>{usdExact(bucket.costUsd)}</td>
                    </tr>
                  ))}
              </tbody>
              <UsageTotals buckets={series.buckets} />
            </table>
          </div>
        </>
      )}
    </section>
  );
}
