import type { z } from 'zod';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import { toSpendCapView } from '../../core/identity/spend-cap.ts';
import type { ApiKey, SpendWindows } from '../../core/ports/identity.ts';
import type { budgetStatusView, keyView, spendWindowsView } from './key-schemas.ts';

export function keyStatus(key: ApiKey, now: Date): z.infer<typeof keyView>['status'] {
  if (key.revokedAt) return 'revoked';
  if (key.disabled) return 'disabled';
  if (key.expiresAt && key.expiresAt <= now) return 'expired';
  return 'active';
}

const iso = (value: Date | null) => (value ? value.toISOString() : null);

export function toKeyView(key: ApiKey, now: Date): z.infer<typeof keyView> {
  return {
    object: 'api_key',
    id: key.id,
    name: key.name,
    hint: key.hint,
    projectId: key.projectId,
    appId: key.appId,
    scopes: key.scopes,
    models: key.modelAllowList,
    status: keyStatus(key, now),
    disabled: key.disabled,
    expiresAt: iso(key.expiresAt),
    spendCap: toSpendCapView(key.spendCap),
    rateLimits: key.rateLimits,
    createdAt: key.createdAt.toISOString(),
    updatedAt: key.updatedAt.toISOString(),
    lastUsedAt: iso(key.lastUsedAt),
    revokedAt: iso(key.revokedAt),
  };
}

export function toSpendView(windows: SpendWindows): z.infer<typeof spendWindowsView> {
  return {
    totalUsd: microsToUsd(windows.totalMicros),
    todayUsd: microsToUsd(windows.todayMicros),
    weekUsd: microsToUsd(windows.weekMicros),
    monthUsd: microsToUsd(windows.monthMicros),
  };
}

const PERIOD_WINDOW = { day: 'todayMicros', week: 'weekMicros', month: 'monthMicros', total: 'totalMicros' } as const;

export function toBudgetView(key: ApiKey, windows: SpendWindows): z.infer<typeof budgetStatusView> {
  const cap = key.spendCap;
  if (!cap) return { state: 'uncapped', capUsd: null, period: null, mode: null, spentUsd: null, remainingUsd: null };
  const spent = windows[PERIOD_WINDOW[cap.period]];
  const remaining = cap.limitMicros > spent ? cap.limitMicros - spent : 0n;
  const reached = spent >= cap.limitMicros;
  return {
    state: !reached ? 'ok' : cap.mode === 'blocking' ? 'exceeded' : 'alerting',
    capUsd: microsToUsd(cap.limitMicros),
    period: cap.period,
    mode: cap.mode,
    spentUsd: microsToUsd(spent),
    remainingUsd: microsToUsd(remaining),
  };
}
