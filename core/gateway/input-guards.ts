import type { Credential } from '../identity/credential.ts';
import { defineContributionPoint } from '../kernel/extension-points.ts';

/**
 * Data guardrails: checks on the input of every /v1 call, made before any upstream call and before
 * any money is taken. A plugin contributes an InputGuard; the gateway call path asks each guard,
 * in plugin order, for the caller's check, then runs every text of the request's input (messages,
 * prompts, embedding inputs, speech input…) through every check. A `block` ends the call with 422
 * `guardrail_blocked` (logged without its body, billed nothing); a `redact` replaces the text
 * before the call goes upstream, and later guards see the redacted text.
 */
export type GuardDecision = { readonly action: 'allow' } | { readonly action: 'redact'; readonly text: string; readonly rule: string } | { readonly action: 'block'; readonly rule: string };

export interface InputGuardCheck {
  /** Synchronous and pure: it may run for every text part of a large request. */
  check(text: string): GuardDecision;
}

export interface InputGuard {
  /** The check for this caller's account, or null when it has no rules (the usual case: no per-text work). */
  forCall(credential: Credential): InputGuardCheck | null | Promise<InputGuardCheck | null>;
}

export const InputGuardsPoint = defineContributionPoint<InputGuard>('InputGuards');
