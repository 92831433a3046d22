import type { AppConfigInput } from '../../../config/schema.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { allPlugins, buildTestApp, type TapLike, type TestApp } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';

/**
 * Every plugin, with the offline mock as `mock-small` ($1/M input, $2/M output tokens, batches too) and no job
 * worker of its own (role api): a test runs due jobs with `runJobs()`, so a deletion runs exactly
 * when the test says.
 */
export interface AccountApp extends TestApp {
  /** Makes a chat call with the key; resolves with its status. */
  chat(key: string, content?: string): Promise<number>;
  /** Writes the queued request-log rows (and their ledger charges) now. */
  flush(): Promise<void>;
  runJobs(): Promise<void>;
}

export async function accountApp(
  t: TapLike,
  options: {
    clock?: () => Date;
    account?: Record<string, unknown>;
    storage?: AppConfigInput['storage'];
    ownerToken?: string;
    auth?: AppConfigInput['auth'];
    outbound?: AppConfigInput['outbound'];
  } = {},
): Promise<AccountApp> {
  const test = await buildTestApp(t, {
    plugins: {
      ...allPlugins(),
      account: options.account ?? {},
      inference: { providers: { mock: { type: 'mock' } }, models: { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES, batch: true } } },
    },
    config: {
      server: { role: 'api' },
      ...(options.storage ? { storage: options.storage } : {}),
      ...(options.ownerToken ? { bootstrap: { ownerToken: options.ownerToken } } : {}),
      ...(options.auth ? { auth: options.auth } : {}),
      ...(options.outbound ? { outbound: options.outbound } : {}),
    },
    ...(options.clock ? { clock: options.clock } : {}),
  });
  const writer = test.app.svc.container.resolve(MeteringTokens.Writer);
  return {
    ...test,
    async chat(key, content = 'Hello') {
      const response = await test.call('POST', '/v1/chat/completions', { token: key, body: { model: 'mock-small', messages: [{ role: 'user', content }] } });
      return response.statusCode;
    },
    flush: () => writer.flush(),
    runJobs: () => test.app.svc.workers.runUntilIdle(),
  };
}

/** The Database of an app, for checks a route does not answer. */
export const databaseOf = (test: TestApp) => test.app.svc.container.resolve(Tokens.Database);
