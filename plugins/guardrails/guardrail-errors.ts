import { type CodesOf, defineErrorCodes } from '../../core/kernel/error-catalogue.ts';

/** The guardrails plugin's error codes (core/kernel/error-catalogue.ts: what a code is, and why one table). */
export const GUARDRAIL_ERRORS = defineErrorCodes('guardrails', {
  invalid_pattern: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The pattern is not a regular expression this service runs (RE2 syntax: no lookaround, no backreferences)',
  },
  guardrail_rule_not_found: { status: 404, type: 'not_found_error', message: 'No such guardrail rule in this account' },
  guardrail_rule_name_taken: { status: 409, type: 'conflict_error', message: 'The account already has a guardrail rule with this name' },
  guardrail_rules_full: { status: 409, type: 'conflict_error', message: 'The account has as many guardrail rules as allowed; delete one first' },
});

declare module '../../core/kernel/error-catalogue.ts' {
  interface ErrorCodes extends CodesOf<typeof GUARDRAIL_ERRORS> {}
}
