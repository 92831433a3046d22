import { Webhook } from 'standardwebhooks';
import type { AppConfigInput } from '../../config/schema.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import type { ReceivedRequest } from '../fakes/fake-customer-endpoint.ts';
import { allPlugins, buildTestApp, type TapLike, type TestApp, type TestAppOptions } from './app.ts';

/**
 * Webhooks in tests: apps whose outbound client may reach the loopback receivers the tests run
 * (`outbound.allowPrivateNetwork`, the operator's switch; it also lets endpoints use plain http),
 * and the reference verifier of Standard Webhooks, the `standardwebhooks` package, as receivers use it.
 */

/** One attempt well inside any test's patience; the timeout test waits it out. */
export const TEST_TIMEOUT_MS = 1_000;

export function webhookApp(t: TapLike, options: TestAppOptions & { webhooks?: Record<string, unknown> } = {}): Promise<TestApp> {
  const { webhooks, ...rest } = options;
  const config: AppConfigInput = { ...rest.config, outbound: { allowPrivateNetwork: true, ...rest.config?.outbound } };
  const plugins = { ...allPlugins(), webhooks: { timeoutMs: TEST_TIMEOUT_MS, ...webhooks } };
  return buildTestApp(t, { ...rest, config, plugins });
}

export interface CreatedWebhook {
  id: string;
  secret: string;
  body: Record<string, unknown>;
}

export async function createWebhook(test: TestApp, body: Record<string, unknown>, token?: string): Promise<CreatedWebhook> {
  const response = await test.call('POST', '/client/webhooks', { token, body: { eventTypes: ['*'], ...body } });
  if (response.statusCode !== 201) throw new Error(`webhook creation failed: ${response.statusCode} ${response.body}`);
  const created = response.json() as { id: string; secret: string };
  return { id: created.id, secret: created.secret, body: created as unknown as Record<string, unknown> };
}

/**
 * `Webhook.verify` as a receiver whose clock reads `at` runs it: the package checks the timestamp
 * against its own Date.now() (five minutes either way), so a test that moved the service's clock
 * hours ahead verifies as of that time. verify is synchronous: nothing else runs meanwhile.
 */
export function verifyDelivery(secret: string, request: ReceivedRequest, at: Date = new Date()): unknown {
  const realNow = Date.now;
  Date.now = () => at.getTime();
  try {
    return new Webhook(secret).verify(request.body, request.headers as Record<string, string>);
  } finally {
    Date.now = realNow;
  }
}

/** Runs every job that is due now (the fan-out, then the deliveries), as a worker would. */
export async function deliverDue(test: TestApp): Promise<void> {
  await test.app.svc.workers.runUntilIdle();
}

export interface DeliveryView {
  id: string;
  webhookId: string;
  messageId: string;
  eventId: string | null;
  eventType: string;
  test: boolean;
  status: string;
  attemptCount: number;
  nextAttemptAt: string | null;
  finishedAt: string | null;
  payload: Record<string, unknown>;
  attempts: Array<{
    attempt: number;
    attemptedAt: string;
    outcome: string;
    statusCode: number | null;
    durationMs: number;
    responseBody: string | null;
    responseBodyTruncated: boolean;
    errorKind: string | null;
    error: string | null;
    nextAttemptAt: string | null;
  }>;
}

export async function deliveriesOf(test: TestApp, webhookId: string, query = ''): Promise<DeliveryView[]> {
  const response = await test.call('GET', `/client/webhooks/${webhookId}/deliveries${query}`);
  if (response.statusCode !== 200) throw new Error(`deliveries: ${response.statusCode} ${response.body}`);
  return (response.json() as { data: DeliveryView[] }).data;
}

/** Emits a public event the way a customer's action does: a key created through the API (key.created, its project's). */
export async function emitKeyCreated(test: TestApp, body: Record<string, unknown> = {}): Promise<{ id: string }> {
  const response = await test.call('POST', '/client/keys', { body: { name: `event ${Math.random().toString(36).slice(2)}`, ...body } });
  if (response.statusCode !== 201) throw new Error(`key creation failed: ${response.statusCode} ${response.body}`);
  return { id: (response.json() as { id: string }).id };
}

export function database(test: TestApp) {
  return test.app.svc.container.resolve(Tokens.Database);
}

/**
 * The jobs that carry webhooks (their events' fan-out and the deliveries), one line each with
 * their last error: what a delivery test prints when an attempt it expected is missing.
 */
export async function webhookJobsReport(test: TestApp): Promise<string> {
  const { rows } = await database(test).query<Record<string, unknown>>(
    `SELECT queue, state, attempts, run_at, last_error FROM jobs
     WHERE queue = 'event.webhooks' OR queue LIKE 'webhooks.%' ORDER BY created_at, id`,
  );
  const lines = rows.map((row) => `${row['queue']} ${row['state']} attempts=${row['attempts']} runAt=${(row['run_at'] as Date).toISOString()} lastError=${row['last_error'] ?? '-'}`);
  return ['webhook jobs:', ...lines].join('\n');
}
