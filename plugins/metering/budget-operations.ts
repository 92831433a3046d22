import { z } from 'zod';
import type { CapPolicies } from './cap-policies.ts';
import type { RequestLogWriter } from './request-log-writer.ts';
import { microsToUsd } from '../../core/vocabulary/money.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import type { IdentityStores, SpendCap, SpendReader, SpendWindows } from '../../core/ports/identity.ts';
import type { CreditLedger } from '../../core/ports/metering.ts';
import { visibleProjects } from '../../core/identity/project-access.ts';
import { spendCapInput, spendCapView, toSpendCap, toSpendCapView } from '../../core/identity/spend-cap.ts';

interface Deps {
  identity: IdentityStores;
  spend: SpendReader;
  ledger: CreditLedger;
  writer: RequestLogWriter;
  policies: CapPolicies;
  clock: () => Date;
  initialCreditMicros: bigint;
}

/** The wire views: named schemas of the OpenAPI document (`.meta({ id })`), declared once. */
const scopeView = z
  .object({
    scope: z.enum(['account', 'project', 'key']),
    id: z.uuid(),
    name: z.string(),
    capUsd: z.number(),
    period: z.enum(['day', 'week', 'month', 'total']),
    mode: z.enum(['blocking', 'alert']),
    spentUsd: z.number().describe('Spend in the current period, including calls not yet written to the log'),
    remainingUsd: z.number(),
    state: z.enum(['ok', 'alerting', 'exceeded']),
  })
  .meta({ id: 'BudgetScope', description: 'An account, project or key with a spend cap, and where it stands against it' });

const budgetView = z
  .object({
    object: z.literal('budget'),
    balanceUsd: z.number(),
    accountCap: spendCapView.nullable(),
    scopes: z.array(scopeView),
  })
  .meta({ id: 'Budget', description: 'Spend against every cap the caller can see, and the credit balance' });

const accountCapView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), accountCap: spendCapView.nullable() })
  .meta({ id: 'AccountCapSetting', description: 'The account-wide spend cap as it is after the change' });

const requestLoggingView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), requestLogging: z.boolean() })
  .meta({ id: 'RequestLoggingSetting', description: 'Whether the request log keeps prompt and response bodies, after the change' });

const PERIOD_WINDOW = { day: 'todayMicros', week: 'weekMicros', month: 'monthMicros', total: 'totalMicros' } as const;

export function budgetOperations(deps: Deps): AnyOperation[] {
  const { identity, spend, writer, clock } = deps;

  const row = (scope: 'account' | 'project' | 'key', id: string, name: string, cap: SpendCap, windows: SpendWindows, pending: bigint): z.infer<typeof scopeView> => {
    const spent = windows[PERIOD_WINDOW[cap.period]] + pending;
    const reached = spent >= cap.limitMicros;
    return {
      scope,
      id,
      name,
      capUsd: microsToUsd(cap.limitMicros),
      period: cap.period,
      mode: cap.mode,
      spentUsd: microsToUsd(spent),
      remainingUsd: microsToUsd(reached ? 0n : cap.limitMicros - spent),
      state: !reached ? 'ok' : cap.mode === 'blocking' ? 'exceeded' : 'alerting',
    };
  };

  const report = defineOperation({
    name: 'budget.get',
    method: 'GET',
    path: '/budget',
    summary: 'Spend against every cap the caller can see, and the credit balance',
    scope: 'usage:read',
    readOnly: true,
    output: budgetView,
    async handler(_input, { credential }) {
      const now = clock();
      const orgId = credential.organizationId;
      await deps.ledger.ensureAccount(orgId, deps.initialCreditMicros);
      const balance = ((await deps.ledger.balance(orgId)) ?? 0n) - writer.pendingMicros('account', orgId);
      const organization = await identity.organizations.get(orgId);
      const scopes: z.infer<typeof scopeView>[] = [];
      if (organization?.spendCap) {
        scopes.push(row('account', orgId, organization.name, organization.spendCap, await spend.forOrganization(orgId, now), writer.pendingMicros('account', orgId)));
      }
      const projects = await visibleProjects(identity, credential);
      for (const project of projects) {
        if (project.spendCap) {
          scopes.push(row('project', project.id, project.name, project.spendCap, await spend.forProject(project.id, now), writer.pendingMicros('project', project.id)));
        }
      }
      const visible = new Set(projects.map((p) => p.id));
      for (const key of await identity.apiKeys.list(orgId)) {
        if (!key.spendCap || key.revokedAt || !visible.has(key.projectId)) continue;
        if (credential.kind === 'key' && key.projectId !== credential.projectId) continue;
        scopes.push(row('key', key.id, key.name, key.spendCap, await spend.forKey(key.id, now), writer.pendingMicros('key', key.id)));
      }
      return { object: 'budget' as const, balanceUsd: microsToUsd(balance), accountCap: toSpendCapView(organization?.spendCap ?? null), scopes };
    },
  });

  const setAccountCap = defineOperation({
    name: 'budget.update',
    method: 'PATCH',
    path: '/budget',
    summary: 'Set or clear the account-wide spend cap (owner only)',
    readOnly: false,
    idempotent: true,
    scope: null,
    ownerOnly: true,
    body: z.strictObject({ accountCap: spendCapInput.nullable() }),
    output: accountCapView,
    async handler({ body }, { credential }) {
      const updated = await identity.organizations.update(credential.organizationId, { spendCap: toSpendCap(body.accountCap) });
      deps.policies.forget(credential.organizationId);
      return { object: 'ack' as const, ok: true as const, accountCap: toSpendCapView(updated?.spendCap ?? null) };
    },
  });

  const logRequests = defineOperation({
    name: 'account.logRequests',
    method: 'POST',
    path: '/log-requests',
    summary: 'Turn keeping prompt and response bodies in the request log on or off (owner only)',
    description: 'While on, each gateway call keeps its request and response bodies; they are shown only to roles that may read them.',
    readOnly: false,
    idempotent: true,
    scope: null,
    ownerOnly: true,
    body: z.strictObject({ enabled: z.boolean() }),
    output: requestLoggingView,
    async handler({ body }, { credential }) {
      const updated = await identity.organizations.update(credential.organizationId, { requestLogging: body.enabled });
      deps.policies.forget(credential.organizationId);
      return { object: 'ack' as const, ok: true as const, requestLogging: updated?.requestLogging ?? body.enabled };
    },
  });

  return [report, setAccountCap, logRequests];
}
