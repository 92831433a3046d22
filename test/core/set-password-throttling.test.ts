import t, { type Test } from 'tap';
import type { AppConfigInput } from '../../config/schema.ts';
import { PASSWORD_TOKEN_PREFIX } from '../../core/identity/identity-admin.ts';
import { generateToken } from '../../core/identity/api-tokens.ts';
import { buildTestApp } from '../helpers/app.ts';
import { fastDeriveKey, invite, onEachBackend as onEach, setPasswordFrom } from '../helpers/people.ts';

// Several apps, each on both backends: on this project's loaded 2-core machine that can pass the default 120 s.
t.setTimeout(300_000);

/** Hashing is not the subject here: a fast stand-in keeps a hundred attempts quick (password-hashing.test.ts has scrypt). */
const build = (t: Test, config: AppConfigInput) => buildTestApp(t, { config, deriveKey: fastDeriveKey });
const onEachBackend = (name: string, run: (t: Test, config: AppConfigInput) => Promise<void>) => onEach(t, name, run);

onEachBackend('150 wrong set-password tokens from one address are answered 429 after the first ten', async (t, config) => {
  const test = await build(t, config);
  const answers: Array<{ status: number; code: string; retryAfter: unknown }> = [];
  for (let i = 0; i < 150; i++) {
    const response = await setPasswordFrom(test, '203.0.113.50', generateToken(PASSWORD_TOKEN_PREFIX));
    answers.push({ status: response.statusCode, code: response.json().error?.code, retryAfter: response.headers['retry-after'] });
  }
  t.same(new Set(answers.slice(0, 10).map((a) => a.code)), new Set(['invalid_token']));
  const refused = answers.slice(10);
  t.same(new Set(refused.map((a) => `${a.status} ${a.code}`)), new Set(['429 too_many_set_password_attempts']));
  t.ok(
    refused.every((a) => typeof a.retryAfter === 'string' && /^\d+$/.test(a.retryAfter)),
    'each refusal says when to retry',
  );
  const token = await invite(test, 'fresh@example.com');
  t.equal((await setPasswordFrom(test, '10.0.0.3', token)).statusCode, 200, 'another address is not affected');
});

onEachBackend('one set-password token is throttled whatever address it comes from', async (t, config) => {
  const test = await build(t, { ...config, auth: { setPasswordAttemptsPerToken: 3 } });
  const token = await invite(test, 'fumbler@example.com');
  const codes: string[] = [];
  for (let i = 1; i <= 4; i++) codes.push((await setPasswordFrom(test, `198.51.100.${i}`, token, 'too short')).json().error.code);
  t.same(codes, ['password_too_short', 'password_too_short', 'password_too_short', 'too_many_set_password_attempts']);
});
