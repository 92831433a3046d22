const REDACTED = '[redacted]';

/** Replaces every occurrence of each secret (API keys) in a string. Secrets shorter than 4 chars are ignored: they would mangle text without protecting anything. */
export function redactText(text: string, secrets: readonly string[]): string {
  let out = text;
  for (const secret of secrets) {
    if (secret.length >= 4 && out.includes(secret)) out = out.split(secret).join(REDACTED);
  }
  return out;
}

/** Deep copy of a parsed JSON value with secrets removed from every string in it. */
export function redactValue(value: unknown, secrets: readonly string[]): unknown {
  if (secrets.length === 0) return value;
  if (typeof value === 'string') return redactText(value, secrets);
  if (Array.isArray(value)) return value.map((item) => redactValue(item, secrets));
  if (value !== null && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) out[redactText(key, secrets)] = redactValue(item, secrets);
    return out;
  }
  return value;
}
