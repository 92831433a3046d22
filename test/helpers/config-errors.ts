import type t from 'tap';
import { ConfigError } from '../../config/load.ts';

/** The assertions used here; satisfied by the root test and by subtests. */
export type Asserts = Pick<typeof t, 'ok' | 'notOk' | 'equal' | 'not' | 'same' | 'match' | 'fail'>;

/** Asserts `fn` throws a ConfigError whose message is one line naming `field`. */
export function assertConfigError(t: Asserts, fn: () => unknown, field: string, also?: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (error) {
    caught = error;
  }
  if (!(caught instanceof ConfigError)) {
    t.fail(`expected a ConfigError naming ${field}, got ${caught === undefined ? 'no error (accepted)' : String(caught)}`);
    return;
  }
  const message = caught.message;
  t.notOk(/[\r\n]/.test(message), `message is one line: ${JSON.stringify(message)}`);
  t.match(message, /^config: /, 'message starts with "config: "');
  t.ok(message.includes(field), `message names ${field}: ${JSON.stringify(message)}`);
  if (also) t.match(message, also);
}
