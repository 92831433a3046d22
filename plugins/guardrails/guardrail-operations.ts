import { z } from 'zod';
import { ApiError } from '../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../core/operations/operations.ts';
import { UniqueViolation } from '../../core/ports/database.ts';
import { resourceId } from '../../core/vocabulary/ids.ts';
import type { AccountGuard } from './account-guard.ts';
import { InvalidPattern, patternDetector } from './detectors.ts';
import type { GuardrailRule, GuardrailStore } from './guardrail-store.ts';
import { createRuleRequest, guardrailsView, MAX_RULES, ruleRemovalView, ruleView, testRequest, testView, updateRuleRequest } from './guardrail-schemas.ts';
import { CompiledRules, type RuleSpec } from './rule-evaluation.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './guardrail-errors.ts';

interface Deps {
  store: GuardrailStore;
  guard: AccountGuard;
  clock: () => Date;
}

const idParams = z.strictObject({ id: resourceId.describe('Guardrail rule id') });

/**
 * Reading the rules and trying them needs `usage:read`, the scope of the account's other governance
 * reports (budget, usage): members hold it, and so do keys granted it. Changing them is an owner's
 * act, like spend caps: an owner's session only, never an API key.
 */
const READ_SCOPE = 'usage:read';

function toView(rule: GuardrailRule) {
  return {
    object: 'guardrail_rule' as const,
    id: rule.id,
    name: rule.name,
    detector: rule.detector,
    pattern: rule.pattern,
    action: rule.action,
    enabled: rule.enabled,
    createdAt: rule.createdAt.toISOString(),
    updatedAt: rule.updatedAt.toISOString(),
  };
}

/** A pattern RE2 refuses is a 400 naming the field it came from. */
function assertCompiles(pattern: string, param: string): void {
  try {
    patternDetector(pattern);
  } catch (error) {
    if (error instanceof InvalidPattern) throw new ApiError('invalid_pattern', `Invalid '${param}': ${error.message}`, { param });
    throw error;
  }
}

const nameTaken = (name: string) => new ApiError('guardrail_rule_name_taken', `The account already has a guardrail rule named '${name}'`, { param: 'name' });
const notFound = () => new ApiError('guardrail_rule_not_found');

export function guardrailOperations({ store, guard, clock }: Deps): AnyOperation[] {
  const list = defineOperation({
    name: 'guardrails.list',
    method: 'GET',
    path: '/guardrails',
    summary: "The account's data guardrail rules",
    description:
      'Every rule, enabled or not, in the order they were made. The enabled ones run on the input texts of every /v1 call before any upstream call ' +
      'and before money is reserved: a block rule that matches refuses the call with 422 guardrail_blocked; a redact rule replaces its matches.',
    scope: READ_SCOPE,
    readOnly: true,
    output: guardrailsView,
    async handler(_input, { credential }) {
      const rules = await store.list(credential.organizationId);
      return { object: 'guardrails' as const, rules: rules.map(toView), maxRules: MAX_RULES };
    },
  });

  const create = defineOperation({
    name: 'guardrails.create',
    method: 'POST',
    path: '/guardrails/rules',
    summary: 'Add a data guardrail rule (owner only)',
    description: `At most ${MAX_RULES} rules per account. The rule applies to calls on every replica within moments.`,
    readOnly: false,
    scope: null,
    ownerOnly: true,
    body: createRuleRequest,
    errors: ['invalid_pattern', 'guardrail_rule_name_taken', 'guardrail_rules_full'],
    output: ruleView,
    status: 201,
    async handler({ body }, { credential, transaction }) {
      if (body.pattern !== undefined) assertCompiles(body.pattern, 'pattern');
      const organizationId = credential.organizationId;
      const rule = await transaction(async (tx) => {
        if ((await store.countLocked(tx, organizationId)) >= MAX_RULES) {
          throw new ApiError('guardrail_rules_full', `The account has ${MAX_RULES} guardrail rules, the most allowed; delete one first`);
        }
        const newRule = { name: body.name, detector: body.detector, pattern: body.pattern ?? null, action: body.action, enabled: body.enabled ?? true };
        return store.create(tx, organizationId, newRule, clock()).catch((error: unknown) => {
          throw error instanceof UniqueViolation ? nameTaken(body.name) : error;
        });
      });
      await guard.invalidate(organizationId);
      return toView(rule);
    },
  });

  const update = defineOperation({
    name: 'guardrails.update',
    method: 'PATCH',
    path: '/guardrails/rules/:id',
    summary: 'Change a data guardrail rule: name, pattern, action, or enabled (owner only)',
    readOnly: false,
    idempotent: true,
    scope: null,
    ownerOnly: true,
    params: idParams,
    body: updateRuleRequest,
    errors: ['guardrail_rule_not_found', 'invalid_pattern', 'guardrail_rule_name_taken'],
    output: ruleView,
    async handler({ params, body }, { credential, transaction }) {
      const organizationId = credential.organizationId;
      const rule = await transaction(async (tx) => {
        const current = await store.get(tx, organizationId, params.id);
        if (!current) throw notFound();
        if (body.pattern !== undefined) {
          if (current.detector !== 'pattern') {
            throw new ApiError('invalid_parameter', `Invalid 'pattern' in body: the ${current.detector} detector takes no pattern`, { param: 'pattern' });
          }
          assertCompiles(body.pattern, 'pattern');
        }
        const updated = await store.update(tx, organizationId, params.id, body, clock()).catch((error: unknown) => {
          throw error instanceof UniqueViolation && body.name !== undefined ? nameTaken(body.name) : error;
        });
        if (!updated) throw notFound();
        return updated;
      });
      await guard.invalidate(organizationId);
      return toView(rule);
    },
  });

  const remove = defineOperation({
    name: 'guardrails.delete',
    method: 'DELETE',
    path: '/guardrails/rules/:id',
    summary: 'Delete a data guardrail rule (owner only)',
    readOnly: false,
    destructive: true,
    idempotent: true,
    scope: null,
    ownerOnly: true,
    params: idParams,
    errors: ['guardrail_rule_not_found'],
    output: ruleRemovalView,
    async handler({ params }, { credential, transaction }) {
      const deleted = await transaction((tx) => store.delete(tx, credential.organizationId, params.id));
      if (!deleted) throw notFound();
      await guard.invalidate(credential.organizationId);
      return { object: 'ack' as const, ok: true as const, id: params.id, status: 'deleted' as const };
    },
  });

  const test = defineOperation({
    name: 'guardrails.test',
    method: 'POST',
    path: '/guardrails/test',
    summary: 'What the rules would do to a sample input; nothing is stored',
    description:
      "Runs the account's enabled rules, or the draft rules sent in `rules`, on `text` exactly as a /v1 call's input is checked, and answers " +
      'the decision, the text as it would go upstream, and what each rule found. The text is neither stored nor logged.',
    scope: READ_SCOPE,
    readOnly: true,
    body: testRequest,
    errors: ['invalid_pattern'],
    output: testView,
    async handler({ body }, { credential }) {
      let specs: RuleSpec[];
      if (body.rules) {
        body.rules.forEach((draft, i) => {
          if (draft.pattern !== undefined) assertCompiles(draft.pattern, `rules.${i}.pattern`);
        });
        specs = body.rules.filter((draft) => draft.enabled !== false).map((draft) => ({ ...draft, id: null, pattern: draft.pattern ?? null }));
      } else {
        specs = await store.enabled(credential.organizationId);
      }
      const { decision, findings } = new CompiledRules(specs).evaluate(body.text);
      return {
        object: 'guardrail_test' as const,
        action: decision.action,
        rule: decision.action === 'allow' ? null : decision.rule,
        text: decision.action === 'block' ? null : decision.action === 'redact' ? decision.text : body.text,
        findings: findings.map(({ rule, matches }) => ({ ruleId: rule.id, name: rule.name, detector: rule.detector, action: rule.action, matches })),
      };
    },
  });

  return [list, create, update, remove, test];
}
