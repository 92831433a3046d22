import { useEffect, useState } from 'preact/hooks';
import { api } from '../api/client.ts';
import { unwrap } from '../api/errors.ts';
import type { components } from '../api/schema.d.ts';
import { count, percent, usd } from '../format.ts';
import { Loading } from '../ui.tsx';

type Overview = components['schemas']['AccountOverview'];
type Figure = Overview['figures'][number];

const WINDOW_LABEL: Record<Figure['window'], string> = { now: 'now', today: 'today (UTC)', month: 'this month (UTC)', last_30_days: 'last 30 days' };

function figureValue(figure: Figure): string {
  if (figure.unit === 'usd') return usd(figure.value);
  if (figure.unit === 'ratio') return percent(figure.value);
  return count(figure.value);
}

/** The account at a glance: whatever figures the API gives (balance, spend, calls, error rate, …). */
export function OverviewPage() {
  const [overview, setOverview] = useState<Overview | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    api
      .GET('/overview')
      .then((result) => setOverview(unwrap(result)))
      .catch((error: unknown) => setFailure(error instanceof Error ? error.message : String(error)));
  }, []);
  return (
    <section>
      <h1>Overview</h1>
      {failure ? <p role="alert">{failure}</p> : null}
      {overview === null ? (
        failure ? null : (
          <Loading what="the overview" />
        )
      ) : (
        <>
          <p class="muted">{overview.organization.name}</p>
          <dl class="figures" data-testid="overview-figures">
            {overview.figures.map((figure) => (
              <div class="figure" key={`${figure.source}:${figure.label}`}>
                <dt>
                  {figure.label} <span class="muted">{WINDOW_LABEL[figure.window]}</span>
                </dt>
                <dd>{figureValue(figure)}</dd>
              </div>
            ))}
          </dl>
        </>
      )}
    </section>
  );
}
