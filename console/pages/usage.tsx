import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import { api } from '../api/client.ts';
import { unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { count, microsOf, usdExact } from '../format.ts';
import { Loading, Time } from '../ui.tsx';

type Series = components['schemas']['UsageSeries'];
type Report = components['schemas']['UsageReport'];
type Comparison = components['schemas']['UsageComparison'];
type Key = components['schemas']['Key'];
type Project = components['schemas']['Project'];
type Bucket = Series['buckets'][number];

/** Distinct on light and dark backgrounds; a model past the eighth reuses a colour, its legend names it. */
const PALETTE = ['#2563eb', '#d97706', '#059669', '#db2777', '#7c3aed', '#0891b2', '#65a30d', '#dc2626'];

const reducedMotion = () => matchMedia('(prefers-reduced-motion: reduce)').matches;

/** One uPlot chart of one measure over the buckets, oldest first as a time axis reads. */
function Chart({ title, buckets, measure, money = false }: { title: string; buckets: Series['buckets']; measure: (bucket: Bucket) => number; money?: boolean }) {
  const holder = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = holder.current;
    if (!element) return;
    const ordered = [...buckets].reverse();
    const data: uPlot.AlignedData = [ordered.map((bucket) => Date.parse(bucket.start) / 1000), ordered.map(measure)];
    const width = Math.max(280, element.clientWidth);
    const plot = new uPlot(
      {
        width,
        height: 220,
        series: [{}, { label: title, stroke: 'currentColor', width: 2 }],
        axes: money ? [{}, { values: dollarTicks, size: 70 }] : [{}, {}],
        legend: { show: false },
        cursor: { drag: { x: !reducedMotion() } },
      },
      data,
      element,
    );
    return () => plot.destroy();
  }, [buckets, measure, title, money]);
  return <div class="chart" ref={holder} role="img" aria-label={`${title} per bucket; the table below lists the same data`} />;
}

const cost = (bucket: Series['buckets'][number]) => bucket.costUsd;

/** Dollar ticks with the digits their spacing needs: uPlot's own would show $0.001 twice for sub-cent steps. */
const dollarTicks = (_plot: uPlot, ticks: number[]) => {
  const step = ticks.length > 1 ? Math.abs(ticks[1]! - ticks[0]!) : 1;
  const digits = Math.min(6, Math.max(2, Math.ceil(-Math.log10(step || 1)) + 1));
  return ticks.map((tick) => `$${tick.toFixed(digits)}`);
};

/** Cost per bucket, one line per model (by=model), oldest first; the legend names each model. */
function ModelChart({ buckets, models }: { buckets: Series['buckets']; models: readonly string[] }) {
  const holder = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const element = holder.current;
    if (!element || models.length === 0) return;
    const ordered = [...buckets].reverse();
    const costOf = (bucket: Bucket, model: string) => bucket.models?.find((each) => (each.model ?? '(none)') === model)?.costUsd ?? 0;
    const data: uPlot.AlignedData = [ordered.map((bucket) => Date.parse(bucket.start) / 1000), ...models.map((model) => ordered.map((bucket) => costOf(bucket, model)))];
    const plot = new uPlot(
      {
        width: Math.max(280, element.clientWidth),
        height: 240,
        series: [{}, ...models.map((model, index) => ({ label: model, stroke: PALETTE[index % PALETTE.length]!, width: 2 }))],
        axes: [{}, { values: dollarTicks, size: 70 }],
        cursor: { drag: { x: !reducedMotion() } },
      },
      data,
      element,
    );
    return () => plot.destroy();
  }, [buckets, models]);
  return <div class="chart" ref={holder} role="img" aria-label="Cost per bucket by model; the table by model below lists the totals" />;
}

/** The window against the one before it (`/usage/comparison`). */
function ComparisonTable({ comparison }: { comparison: Comparison }) {
  const change = (delta: { percent: number | null }) => (delta.percent === null ? '—' : `${delta.percent > 0 ? '+' : ''}${delta.percent.toFixed(1)}%`);
  const rows: [string, string, string, string][] = [
    ['Requests', count(comparison.current.totals.requests), count(comparison.previous.totals.requests), change(comparison.deltas.requests)],
    ['Errors', count(comparison.current.totals.errors), count(comparison.previous.totals.errors), change(comparison.deltas.errors)],
    ['Cost', usdExact(comparison.current.totals.costUsd), usdExact(comparison.previous.totals.costUsd), change(comparison.deltas.costUsd)],
  ];
  return (
    <div class="table-wrap">
      <table data-testid="usage-comparison">
        <caption>This window against the one just before it, of the same length</caption>
        <thead>
          <tr>
            <th scope="col">Measure</th>
            <th scope="col">This window</th>
            <th scope="col">Previous window</th>
            <th scope="col">Change</th>
          </tr>
        </thead>
        <tbody>
          {rows.map(([label, now, before, delta]) => (
            <tr key={label}>
              <th scope="row">{label}</th>
              <td>{now}</td>
              <td>{before}</td>
              <td>{delta}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The measures both usage tables show, after their first column. */
function MeasureHeadings({ first }: { first: string }) {
  return (
    <thead>
      <tr>
        <th scope="col">{first}</th>
        <th scope="col">Requests</th>
        <th scope="col">Errors</th>
        <th scope="col">Input tokens</th>
        <th scope="col">Output tokens</th>
        <th scope="col">Cost</th>
      </tr>
    </thead>
  );
}

function MeasureCells({ sums }: { sums: { requests: number; errors: number; tokens: { input: number; output: number }; costUsd: number } }) {
  return (
    <>
      <td>{count(sums.requests)}</td>
      <td>{count(sums.errors)}</td>
      <td>{count(sums.tokens.input)}</td>
      <td>{count(sums.tokens.output)}</td>
      <td>{usdExact(sums.costUsd)}</td>
    </>
  );
}

/** Totals per model over the window (`/usage`), costliest first as the API orders them. */
function ModelTable({ report }: { report: Report }) {
  return (
    <div class="table-wrap">
      <table data-testid="usage-models">
        <caption>By model over the window (cost to the micro-dollar)</caption>
        <MeasureHeadings first="Model" />
        <tbody>
          {report.models.map((model) => (
            <tr key={model.model ?? '(none)'} data-model={model.model ?? ''}>
              <th scope="row">{model.model ?? '(none)'}</th>
              <MeasureCells sums={model} />
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

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
  const [projectId, setProjectId] = useState('');
  const [keys, setKeys] = useState<readonly Key[]>([]);
  const [projects, setProjects] = useState<readonly Project[]>([]);
  const [series, setSeries] = useState<Series | null>(null);
  const [report, setReport] = useState<Report | null>(null);
  const [comparison, setComparison] = useState<Comparison | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    api
      .GET('/keys', { params: { query: { limit: 200 } } })
      .then((result) => setKeys(unwrap(result).data))
      .catch(() => undefined);
    api
      .GET('/projects', { params: { query: { limit: 200 } } })
      .then((result) => setProjects(unwrap(result).data))
      .catch(() => undefined);
  }, []);
  useEffect(() => {
    const to = new Date();
    const from = new Date(to.getTime() - (granularity === 'hour' ? 2 : 30) * 86_400_000);
    const window = { from: from.toISOString(), to: to.toISOString(), ...(keyId ? { keyId } : {}), ...(projectId ? { projectId } : {}) };
    setSeries(null);
    Promise.all([
      api.GET('/usage/series', { params: { query: { ...window, granularity, by: 'model' } } }),
      api.GET('/usage', { params: { query: { ...window, limit: 1 } } }),
      api.GET('/usage/comparison', { params: { query: window } }),
    ])
      .then(([charted, reported, compared]) => {
        setFailure(null);
        setReport(unwrap(reported));
        setComparison(unwrap(compared));
        setSeries(unwrap(charted));
      })
      .catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  }, [granularity, keyId, projectId]);
  const models = useMemo(() => (report ? report.models.map((model) => model.model ?? '(none)') : []), [report]);
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
        <div class="field">
          <label for="usage-project">Project</label>
          <select id="usage-project" value={projectId} onChange={(event) => setProjectId(event.currentTarget.value)}>
            <option value="">every project</option>
            {projects.map((project) => (
              <option key={project.id} value={project.id}>
                {project.name}
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
          {comparison ? <ComparisonTable comparison={comparison} /> : null}
          <h2>Cost (USD)</h2>
          <Chart title="Cost (USD)" buckets={series.buckets} measure={cost} money />
          <h2>Cost by model (USD)</h2>
          <ModelChart buckets={series.buckets} models={models} />
          {report ? <ModelTable report={report} /> : null}
          <h2>Requests</h2>
          <Chart title="Requests" buckets={series.buckets} measure={requests} />
          <div class="table-wrap">
            <table data-testid="usage-table">
              <caption>Usage per {series.granularity} (UTC buckets, newest first; cost to the micro-dollar)</caption>
              <MeasureHeadings first="Start" />
              <tbody>
                {series.buckets
                  .filter((bucket) => bucket.requests > 0)
                  .map((bucket) => (
                    <tr key={bucket.start} data-start={bucket.start} data-cost-usd={String(bucket.costUsd)}>
                      <td>
                        <Time iso={bucket.start} />
                      </td>
                      <MeasureCells sums={bucket} />
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
