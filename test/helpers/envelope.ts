import type t from 'tap';

/** The assertions assertEnvelope uses; satisfied by the root test and by subtests. */
export type Tap = Pick<typeof t, 'ok' | 'notOk' | 'equal' | 'not' | 'same' | 'match' | 'fail'>;

export interface Envelope {
  error: { message: string; type: string; code: string; param: string | null };
}

/** What assertEnvelope reads: an app.inject response, or a raw socket's (test/helpers/raw-http.ts). */
export interface AnyResponse {
  statusCode: number;
  headers: Record<string, unknown>;
  body: string;
}

/** The spec's envelope, exactly: {error:{message,type,code,param}} and nothing else. */
export function assertEnvelope(t: Tap, response: AnyResponse, status: number, expect: { code?: string; param?: string | null } = {}): Envelope | null {
  const label = `${response.statusCode} ${response.body.slice(0, 160)}`;
  t.equal(response.statusCode, status, `status ${status} (${label})`);
  t.match(String(response.headers['content-type'] ?? ''), /^application\/json/, 'answers JSON');
  let body: unknown;
  try {
    body = JSON.parse(response.body);
  } catch {
    t.fail(`body is not JSON: ${label}`);
    return null;
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    t.fail(`body is not an object: ${label}`);
    return null;
  }
  t.same(Object.keys(body), ['error'], 'the body holds only `error`');
  const error = (body as Record<string, unknown>).error;
  if (typeof error !== 'object' || error === null) {
    t.fail(`error is not an object: ${label}`);
    return null;
  }
  t.same(Object.keys(error).sort(), ['code', 'message', 'param', 'type'], 'error has exactly message, type, code, param');
  const e = error as Record<string, unknown>;
  t.ok(typeof e.message === 'string' && e.message.length > 0, 'message is a non-empty string');
  t.ok(typeof e.type === 'string' && e.type.length > 0, 'type is a non-empty string');
  t.ok(typeof e.code === 'string' && /^[a-z][a-z0-9_]*$/.test(e.code), `code is a snake_case string (${String(e.code)})`);
  t.ok(e.param === null || typeof e.param === 'string', 'param is a string or null');
  if (expect.code !== undefined) t.equal(e.code, expect.code, `code ${expect.code}`);
  if (expect.param !== undefined) t.equal(e.param, expect.param, `param ${String(expect.param)}`);
  return body as Envelope;
}
