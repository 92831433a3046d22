import { z } from 'zod';
import { InputGuardsPoint } from '../../core/gateway/input-guards.ts';
import { createToken } from '../../core/kernel/container.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { OrganizationErasersPoint } from '../../core/kernel/organization-erasure.ts';
import { AccountGuard } from './account-guard.ts';
import { guardrailMigrations } from './guardrail-migrations.ts';
import { guardrailOperations } from './guardrail-operations.ts';
import { GuardrailStore } from './guardrail-store.ts';

const guardrailsConfig = z.strictObject({
  /** How long a replica trusts its copy of an account's rules, should a pushed change be lost. */
  cacheTtlMs: z.number().int().min(0).max(3_600_000).default(10_000),
});

export const GuardrailTokens = {
  Store: createToken<GuardrailStore>('GuardrailStore'),
  /** The guard contributed to InputGuardsPoint; the operations tell it when rules change. */
  Guard: createToken<AccountGuard>('AccountGuard'),
};

/**
 * Data guardrails: per-account rules (built-in detectors for email addresses, card numbers and
 * well-known secrets, or the account's own patterns) that block or redact the input of every /v1
 * call. Owners set them through /client/guardrails; the call path runs them through the guard this
 * plugin contributes to InputGuardsPoint (core/gateway/input-guards.ts).
 */
export const guardrailsPlugin = definePlugin({
  name: 'guardrails',
  description: 'Data guardrails: per-account rules that block or redact the input of every /v1 call',
  configSchema: guardrailsConfig,
  migrations: guardrailMigrations,
  register({ container, config, extensions }) {
    const store = new GuardrailStore(container.resolve(Tokens.Database));
    const guard = new AccountGuard(store, container.resolve(Tokens.Coordination).pubsub, config.cacheTtlMs);
    container.bindValue(GuardrailTokens.Store, store);
    container.bindValue(GuardrailTokens.Guard, guard);
    extensions.contribute(InputGuardsPoint, guard);
    extensions.contribute(OrganizationErasersPoint, { name: 'guardrail rules', erase: (tx, organizationId) => store.eraseOrganization(tx, organizationId) });
  },
  operations: ({ container }) =>
    guardrailOperations({ store: container.resolve(GuardrailTokens.Store), guard: container.resolve(GuardrailTokens.Guard), clock: container.resolve(Tokens.Clock) }),
  start: ({ container }) => container.resolve(GuardrailTokens.Guard).start(),
  stop: ({ container }) => container.resolve(GuardrailTokens.Guard).stop(),
});
