/**
 * A value as jsonb text. jsonb cannot hold U+0000 nor a lone surrogate (a string JavaScript allows,
 * and a caller's prompt, a key's name or a subject may carry); a replacement character stands in,
 * as it does when such a string is written to a text column. JSON.stringify writes a surrogate as
 * an escape only when it is unpaired, so every such escape is one. The scan walks escapes from the
 * left, so text that merely spells one (`\\u0000` once serialised) is left as it was.
 */
export function jsonForStorage(value: unknown): string {
  return JSON.stringify(value ?? null).replace(/\\(\\|u0000|ud[89a-f][0-9a-f]{2})/g, (sequence, what: string) => (what === '\\' ? sequence : '\\ufffd'));
}
