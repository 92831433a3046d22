import { z } from 'zod';
import { instantView } from '../../core/vocabulary/timestamps.ts';
import { BUILT_IN_DETECTORS, MAX_PATTERN_LENGTH } from './detectors.ts';

/** Rules an account may hold: each runs on every input text of every call. */
export const MAX_RULES = 50;
/** The sample text POST /client/guardrails/test runs the rules on. */
export const MAX_TEST_TEXT = 100_000;

const DETECTORS = [...BUILT_IN_DETECTORS, 'pattern'] as const;

const ruleName = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .regex(/^[^\p{Cc}\]]+$/u, 'printable characters other than "]" (a redacted pattern match reads [REDACTED:<name>])')
  .describe('Unique in the account; a pattern rule redacts to [REDACTED:<name>]');
const pattern = z
  .string()
  .min(1)
  .max(MAX_PATTERN_LENGTH)
  .describe(
    `A regular expression in RE2 syntax (no lookaround or backreferences; (?i) for case-insensitive), at most ${MAX_PATTERN_LENGTH} characters; ` +
      'required for the pattern detector and refused for the others',
  );
const action = z.enum(['block', 'redact']).describe('block: the call is refused with 422 guardrail_blocked; redact: each match is replaced before the call goes upstream');

export const createRuleRequest = z
  .strictObject({
    name: ruleName,
    detector: z.enum(DETECTORS).describe("email, card_number (Luhn-valid only), secret (well-known credential formats), or pattern (the account's own regular expression)"),
    pattern: pattern.optional(),
    action,
    enabled: z.boolean().optional().describe('Defaults to true'),
  })
  .superRefine((body, ctx) => {
    if (body.detector === 'pattern' && body.pattern === undefined) {
      ctx.addIssue({ code: 'custom', path: ['pattern'], message: 'the pattern detector needs a pattern' });
    } else if (body.detector !== 'pattern' && body.pattern !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['pattern'], message: `the ${body.detector} detector takes no pattern` });
    }
  });

export const updateRuleRequest = z
  .strictObject({
    name: ruleName.optional(),
    pattern: pattern.optional().describe("Only for a pattern rule; a rule's detector is fixed (make a new rule instead)"),
    action: action.optional(),
    enabled: z.boolean().optional(),
  })
  .refine((body) => Object.keys(body).length > 0, 'send at least one field to change');

export const testRequest = z.strictObject({
  text: z.string().max(MAX_TEST_TEXT).describe(`A sample input, at most ${MAX_TEST_TEXT} characters; it is not stored or logged`),
  rules: z.array(createRuleRequest).max(MAX_RULES).optional().describe("Draft rules to try instead of the account's enabled rules (nothing is saved)"),
});

export const ruleView = z
  .object({
    object: z.literal('guardrail_rule'),
    id: z.uuid(),
    name: z.string(),
    detector: z.enum(DETECTORS),
    pattern: z.string().nullable().describe('The regular expression of a pattern rule; null for a built-in detector'),
    action: z.enum(['block', 'redact']),
    enabled: z.boolean(),
    createdAt: instantView,
    updatedAt: instantView,
  })
  .meta({ id: 'GuardrailRule', description: "One of the account's data guardrail rules, checked on the input of every /v1 call" });

export const guardrailsView = z
  .object({
    object: z.literal('guardrails'),
    rules: z.array(ruleView).describe('Every rule, enabled or not, in the order they were made (the order redactions apply)'),
    maxRules: z.number().int().describe('How many rules the account may hold'),
  })
  .meta({ id: 'Guardrails', description: "The account's data guardrails" });

export const ruleRemovalView = z
  .object({ object: z.literal('ack'), ok: z.literal(true), id: z.uuid(), status: z.literal('deleted') })
  .meta({ id: 'GuardrailRuleRemoval', description: 'A guardrail rule deleted' });

export const testView = z
  .object({
    object: z.literal('guardrail_test'),
    action: z.enum(['allow', 'redact', 'block']).describe('What a call with this input would meet'),
    rule: z.string().nullable().describe('The rule that blocked it, or the first that redacted it; null when allowed'),
    text: z.string().nullable().describe('The text as it would go upstream (redacted when redact); null when blocked'),
    findings: z
      .array(
        z.object({
          ruleId: z.uuid().nullable().describe('null for a draft rule'),
          name: z.string(),
          detector: z.enum(DETECTORS),
          action: z.enum(['block', 'redact']),
          matches: z.number().int().describe('How many matches the rule found'),
        }),
      )
      .describe('Every rule that matched; a blocked text lists only block rules (redactions never run)'),
  })
  .meta({ id: 'GuardrailTest', description: 'What the rules would do to a sample input; nothing is stored' });
