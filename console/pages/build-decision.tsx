import { Fragment } from 'preact';
import type { components } from '../api/schema.d.ts';

type Answer = components['schemas']['BuildDecisionView'];

/** The decided fields in the order a build runs them, with the words the page shows for each. */
const FIELDS = [
  ['rootDir', 'App folder'],
  ['runtime', 'Runtime'],
  ['framework', 'Framework'],
  ['install', 'Install'],
  ['build', 'Build'],
  ['start', 'Start'],
] as const;

interface Chosen {
  value: string | null;
  rule: string;
  evidence: readonly string[];
}

/** A decided field as the API gives it (`{value, rule, evidence}`), or null for anything else. */
function chosenOf(decision: Record<string, unknown>, field: string): Chosen | null {
  const candidate = decision[field] as Partial<Chosen> | undefined;
  if (!candidate || typeof candidate.rule !== 'string' || !Array.isArray(candidate.evidence)) return null;
  return { value: typeof candidate.value === 'string' ? candidate.value : null, rule: candidate.rule, evidence: candidate.evidence };
}

/**
 * How an app is (or would be) built and started, and why: each field's value, the rule that chose
 * it and what it was read from; then the variables the example env file asks for and those still
 * unset, so a deploy does not start without them unnoticed.
 */
export function BuildDecisionView({ answer }: { answer: Answer }) {
  const decision = answer.decision;
  if (decision === null) return <p data-testid="build-decision">No deploy has recorded how this app is built yet.</p>;
  const alsoMatched = Array.isArray(decision['alsoMatched']) ? (decision['alsoMatched'] as string[]) : [];
  return (
    <div data-testid="build-decision">
      <h3>How it is built</h3>
      <dl class="details">
        {FIELDS.map(([field, label]) => {
          const chosen = chosenOf(decision, field);
          if (chosen === null) return null;
          return (
            <Fragment key={field}>
              <dt>{label}</dt>
              <dd>
                <span class="mono">{chosen.value ?? 'none'}</span> <span class="muted">({chosen.rule})</span>
                {chosen.evidence.length > 0 ? <p class="hint">{chosen.evidence.join('; ')}</p> : null}
              </dd>
            </Fragment>
          );
        })}
        {alsoMatched.length > 0 ? (
          <>
            <dt>Also recognised as</dt>
            <dd>{alsoMatched.join(', ')}</dd>
          </>
        ) : null}
        <dt>Variables asked for</dt>
        <dd class="mono">{answer.envKeys === null ? 'unknown' : answer.envKeys.length === 0 ? 'none (no example env file)' : answer.envKeys.join(', ')}</dd>
        <dt>Still unset</dt>
        <dd class="mono" data-testid="missing-env">
          {answer.missingEnv === null ? 'unknown' : answer.missingEnv.length === 0 ? 'none' : answer.missingEnv.join(', ')}
        </dd>
      </dl>
    </div>
  );
}
