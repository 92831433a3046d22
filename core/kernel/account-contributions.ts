import type { Credential } from '../identity/credential.ts';
import type { Scope } from '../identity/scopes.ts';
import { defineContributionPoint } from './extension-points.ts';

/**
 * What the account surface (`GET /client/overview`, `/onboarding`, `/org-map`) gathers from the
 * plugins that own the numbers: each contributes in register(), the account plugin reads them all.
 * A plugin that is not enabled contributes nothing, so its figures, steps and branches are absent,
 * never shown as zero.
 */

/** Who is looking: the organisation, the projects the caller sees (null: every one), when. */
export interface AccountViewer {
  readonly credential: Credential;
  readonly organizationId: string;
  readonly projectIds: readonly string[] | null;
  readonly now: Date;
}

export type FigureUnit = 'usd' | 'count' | 'ratio';

/** `now`: a standing figure; `today` and `month`: the UTC day and calendar month so far; `last_30_days`: rolling. */
export type FigureWindow = 'now' | 'today' | 'month' | 'last_30_days';

export interface OverviewFigure {
  /** camelCase, unique in the overview: `balanceUsd`, `pendingApprovals`. */
  readonly id: string;
  readonly label: string;
  readonly value: number;
  readonly unit: FigureUnit;
  readonly window: FigureWindow;
}

export interface OverviewFigureSource {
  /** The plugin giving the figures, named beside each one. */
  readonly source: string;
  /** A caller without this scope does not see these figures (null: every credential of the organisation). */
  readonly scope: Scope | null;
  /** Real numbers only: a figure that cannot be known (an error rate of no calls) is left out. */
  figures(viewer: AccountViewer): Promise<readonly OverviewFigure[]>;
}

export const OverviewFiguresPoint = defineContributionPoint<OverviewFigureSource>('account.overview-figures');

/** One item of the onboarding checklist, done when the organisation's real state says so. */
export interface OnboardingStep {
  /** snake_case, unique: `first_call`. */
  readonly id: string;
  readonly title: string;
  readonly description: string;
  /** Its place in the checklist, lower first. */
  readonly order: number;
  /** When the organisation first did it, read from what it did (never a stored tick); null until then. */
  doneAt(organizationId: string): Promise<Date | null>;
}

export const OnboardingStepsPoint = defineContributionPoint<OnboardingStep>('account.onboarding-steps');

/** One thing a project holds, as the org map shows it under the project. */
export interface OrgMapLeaf {
  readonly id: string;
  readonly name: string;
  /** The thing's own status word (`running`, `paused`), or null when it has none. */
  readonly status: string | null;
}

/** A kind of thing projects hold that its plugin owns (apps, databases): a branch under each project. */
export interface OrgMapBranchSource {
  /** Plural noun, unique: `apps`. */
  readonly kind: string;
  readonly scope: Scope | null;
  /** The leaves of each of these projects (absent or empty: none). */
  leaves(viewer: AccountViewer, projectIds: readonly string[]): Promise<ReadonlyMap<string, readonly OrgMapLeaf[]>>;
}

export const OrgMapBranchesPoint = defineContributionPoint<OrgMapBranchSource>('account.org-map-branches');
