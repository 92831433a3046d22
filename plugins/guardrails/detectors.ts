import { RE2JS } from 're2js';

/**
 * What a rule looks for in a text. Every expression runs on re2js (RE2's automata): time linear in
 * the text whatever the expression, so neither an account's pattern nor a hostile prompt can stall
 * the call path the way a backtracking RegExp can (an email expression on V8 takes half a second
 * on 30 000 letters without an `@`).
 */
export interface Detector {
  /** The RE2 expression behind it; a match of it is necessary (not always sufficient) for a finding. */
  readonly source: string;
  /** Whether the text holds at least one match: the common path, on RE2's fast DFA where it can. */
  test(text: string): boolean;
  /** Every match, in order, as [start, end) offsets into the text (UTF-16, as String.slice takes). */
  spans(text: string): Array<readonly [number, number]>;
}

export const BUILT_IN_DETECTORS = ['email', 'card_number', 'secret'] as const;
export type BuiltInDetector = (typeof BUILT_IN_DETECTORS)[number];

/**
 * A detector from one expression, optionally keeping only the matches `accept` vouches for.
 * `expression` is asked for at each use, so a built-in is compiled only once a rule uses it.
 */
function expressionDetector(source: string, expression: () => RE2JS, accept?: (match: string) => boolean): Detector {
  const spans = (text: string): Array<readonly [number, number]> => {
    const found: Array<readonly [number, number]> = [];
    const matcher = expression().matcher(text);
    while (matcher.find()) {
      const start = matcher.start();
      const end = matcher.end();
      // An empty match replaces nothing (and would make redaction insert labels between letters).
      if (end > start && (!accept || accept(text.slice(start, end)))) found.push([start, end]);
    }
    return found;
  };
  return {
    source,
    test: accept ? (text) => expression().test(text) && spans(text).length > 0 : (text) => expression().test(text),
    spans,
  };
}

/**
 * The built-in expressions are compiled on first use, not at import: their automata take a few
 * hundred KiB that a replica whose accounts set no guardrails never needs.
 */
function compiledOnFirstUse(source: string): () => RE2JS {
  let expression: RE2JS | undefined;
  return () => {
    expression ??= RE2JS.compile(source);
    return expression;
  };
}

/**
 * Addresses as people write them: a local part, `@`, and a domain of dotted labels ending in an
 * alphabetic top-level label. Not matched: `lodash@4.17.21` (a version), `@Component` and `a @ b`
 * (code), `root@localhost` (no dot), and `icon@2x.png` (a high-density image's file name).
 */
const EMAIL = '[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)+[A-Za-z]{2,24}\\b';
const DENSITY_SUFFIX = /@\d+(?:\.\d+)?x\./;

/** 13 to 19 digits, optionally grouped by single spaces or hyphens, not part of a longer number. */
const CARD_CANDIDATE = '\\b(?:\\d[ -]?){12,18}\\d\\b';

/** The Luhn checksum every payment card number satisfies (ISO/IEC 7812-1); one typo in ten fails it. */
export function passesLuhn(digits: string): boolean {
  let sum = 0;
  let double = false;
  for (let i = digits.length - 1; i >= 0; i -= 1) {
    let digit = digits.charCodeAt(i) - 48;
    if (double) {
      digit *= 2;
      if (digit > 9) digit -= 9;
    }
    sum += digit;
    double = !double;
  }
  return sum % 10 === 0;
}

/**
 * Credentials in formats their issuers publish, each specific enough that ordinary prose or code
 * does not look like one (README.md lists them with their sources).
 */
const SECRET_FORMATS = [
  // AWS access key ids (long-term AKIA, temporary ASIA, and the rarer ABIA/ACCA).
  '(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}',
  // GitHub: personal, OAuth, user-to-server, server-to-server and refresh tokens; fine-grained personal tokens.
  'gh[pousr]_[A-Za-z0-9]{36,251}',
  'github_pat_[A-Za-z0-9_]{60,255}',
  // GitLab personal access tokens.
  'glpat-[A-Za-z0-9_-]{20,}',
  // Slack bot, user, app-level, configuration and refresh tokens.
  'xox[abeoprs]-[A-Za-z0-9-]{10,}',
  'xapp-\\d-[A-Za-z0-9-]{10,}',
  // Anthropic API and admin keys, before OpenAI's (both start with `sk-`).
  'sk-ant-[a-z]{3,5}\\d{2}-[A-Za-z0-9_-]{20,}',
  // OpenAI project, service-account and admin keys, and the older user keys (48 letters and digits).
  'sk-(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}',
  'sk-[A-Za-z0-9]{48}',
  // Stripe secret and restricted keys.
  '(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{24,}',
  // Google API keys.
  'AIza[0-9A-Za-z_-]{35}',
  // npm access tokens.
  'npm_[A-Za-z0-9]{36}',
  // This service's own API keys and session tokens (core/identity/api-tokens.ts).
  'svc_(?:live|sess)_[A-Za-z0-9]{43}',
  // JSON Web Tokens: a base64url JSON header and payload (both start `{"`, hence `eyJ`) and a signature.
  'eyJ[A-Za-z0-9_-]{5,}\\.eyJ[A-Za-z0-9_-]{5,}\\.[A-Za-z0-9_-]{10,}',
];
/** Slack incoming webhooks carry their secret in the URL. */
const SLACK_WEBHOOK = 'https://hooks\\.slack\\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+';
/** A PEM private key: the header, and the whole block when its end line follows. */
const PEM_PRIVATE_KEY = '-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=\\s:,.-]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----)?';
const SECRET = `\\b(?:${SECRET_FORMATS.join('|')})\\b|${SLACK_WEBHOOK}|${PEM_PRIVATE_KEY}`;

export const builtInDetectors: Readonly<Record<BuiltInDetector, Detector>> = {
  email: expressionDetector(EMAIL, compiledOnFirstUse(EMAIL), (match) => !DENSITY_SUFFIX.test(match)),
  card_number: expressionDetector(CARD_CANDIDATE, compiledOnFirstUse(CARD_CANDIDATE), (match) => passesLuhn(match.replace(/[ -]/g, ''))),
  secret: expressionDetector(SECRET, compiledOnFirstUse(SECRET)),
};

export const MAX_PATTERN_LENGTH = 500;

export class InvalidPattern extends Error {
  override readonly name = 'InvalidPattern';
}

/**
 * An account's own regular expression, in RE2 syntax (`(?i)` for case-insensitive). Refused when
 * it does not compile or matches the empty string (it would match everywhere and redact nothing).
 */
export function patternDetector(pattern: string): Detector {
  let expression: RE2JS;
  try {
    expression = RE2JS.compile(pattern);
  } catch (error) {
    throw new InvalidPattern(error instanceof Error ? error.message : String(error));
  }
  if (expression.test('')) throw new InvalidPattern('the pattern matches the empty string, so it would match every text');
  return expressionDetector(expression.pattern(), () => expression);
}
