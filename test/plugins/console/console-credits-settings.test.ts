import { randomUUID } from 'node:crypto';
import type { Page } from 'playwright-core';
import t, { type Test } from 'tap';
import { buildTestApp, createKey } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { listeningBase } from '../../helpers/mcp-client.ts';
import { fastDeriveKey } from '../../helpers/people.ts';
import { consoleBrowser, personWithPassword, sameOriginOnly, seriousViolations, signInThroughThePage } from './browser-fixture.ts';
import { builtConsole, pluginsWithConsole } from './console-fixture.ts';

/**
 * The console's credits and budgets page and its gateway settings in a real browser against the real
 * service on loopback: what the page shows is what the API answers, to the micro-dollar, and what
 * the page does (a payment, a cap, a guardrail rule) is what the API then has.
 */
t.setTimeout(120_000);

const { dir } = await builtConsole(t);
const test = await buildTestApp(t, {
  deriveKey: fastDeriveKey,
  plugins: {
    ...pluginsWithConsole(dir),
    inference: {
      providers: { mock: { type: 'mock' } },
      models: {
        // Prices to the micro-dollar, so a rounding on the page would show.
        'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: { inputPerMTokUsd: 0.123456, cacheWritePerMTokUsd: 0.25, outputPerMTokUsd: 0.654321 } },
        'mock-large': { routes: [{ provider: 'mock', model: 'mock-large' }], prices: TEST_PRICES },
      },
    },
  },
});
const base = await listeningBase(test);
const browser = consoleBrowser(t, base);

type Json = Record<string, any>;

async function call(method: string, url: string, body?: unknown): Promise<{ status: number; json: Json; raw: string }> {
  const response = await test.call(method as 'GET', `/client${url}`, body === undefined ? {} : { body });
  return { status: response.statusCode, json: response.json() as Json, raw: response.body };
}

async function chat(key: string, content: string): Promise<{ status: number; code: string | undefined }> {
  const response = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'mock-small', messages: [{ role: 'user', content }] }),
  });
  const body = (await response.json()) as Json;
  return { status: response.status, code: body.error?.code };
}

/** "$1,234.567891" (or "−$0.01 …") read as integer micro-dollars from the page's text alone. */
function microsOf(text: string | null): bigint {
  const match = /^(−)?\$([\d,]+)\.(\d{2,6})\b/.exec((text ?? '').trim());
  if (!match) throw new Error(`not an amount: ${text}`);
  const micros = BigInt(match[2]!.replaceAll(',', '')) * 1_000_000n + BigInt(match[3]!.padEnd(6, '0'));
  return match[1] ? -micros : micros;
}

const usdMicros = (usd: number) => BigInt(Math.round(usd * 1e6));

await personWithPassword(test, 'credits-owner@example.com', 'owner');
await personWithPassword(test, 'credits-member@example.com', 'member');

async function signedIn(t: Test, email: string, path: string) {
  const watched = await browser.watchedContext(t);
  await watched.page.goto(`${base}${path}`);
  await signInThroughThePage(watched.page, email);
  return watched;
}

/** The page fits a 360 px wide screen: nothing but a table's own scroller is wider than the viewport. */
async function fitsNarrowScreen(t: Test, page: Page, what: string): Promise<void> {
  await page.setViewportSize({ width: 360, height: 740 });
  const overflow = await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth - (globalThis as any).innerWidth);
  t.ok(overflow <= 0, `${what}: no horizontal scroll at 360 px (${overflow} px over)`);
  await page.setViewportSize({ width: 1280, height: 800 });
}

t.test('an owner’s top-up shows in the balance, the statement and the summary to the micro-dollar, as the API has it', async (t) => {
  const watched = await signedIn(t, 'credits-owner@example.com', '/console/credits');
  const { page } = watched;
  await page.getByRole('heading', { name: 'Credits and budgets', level: 1 }).waitFor();
  const reference = `wire-${randomUUID()}`;
  await page.getByLabel('Amount (USD)').fill('12.345678');
  await page.getByLabel('Payment reference (optional)').fill(reference);
  await page.getByRole('button', { name: 'Record payment' }).click();
  await page.getByRole('status').getByText('Payment of $12.345678 recorded').waitFor();

  const credits = await call('GET', '/credits');
  const balance = page.getByTestId('balance');
  await page.waitForFunction((micros) => (globalThis as any).document.querySelector('[data-testid="balance"]')?.dataset.micros === micros, credits.json.balanceMicros);
  t.equal(microsOf(await balance.textContent()), BigInt(credits.json.balanceMicros), `the balance as the API has it (${credits.json.balanceMicros} micro-USD)`);

  // The lens's own answer, not the row the previous lens already showed: the table is redrawn from it.
  const answered = page.waitForResponse((response) => response.url().includes('/client/credits/statement') && response.url().includes('lens=payments'));
  await page.getByLabel('Show').selectOption('payments');
  const shown = (await (await answered).json()).data.length as number;
  await page.waitForFunction((rows) => (globalThis as any).document.querySelectorAll('[data-testid="statement-table"] tbody tr').length === rows, shown);
  const row = page.getByTestId('statement-table').locator('tr', { hasText: reference });
  await row.waitFor();
  const statement = await call('GET', '/credits/statement?lens=payments');
  const line = (statement.json.data as Json[]).find((each) => each.reference === reference)!;
  t.equal(await page.getByTestId('statement-table').locator('tbody tr').count(), statement.json.data.length, 'the payments lens: the API’s lines');
  t.equal(microsOf(await row.locator('td').nth(2).textContent()), usdMicros(line.amountUsd), 'the line’s amount');
  t.equal(usdMicros(line.amountUsd), 12_345_678n, 'which is the payment, exactly');
  t.equal(microsOf(await row.locator('td').nth(3).textContent()), usdMicros(line.balanceAfterUsd), 'the balance after it');

  const summary = await call('GET', '/credits/summary');
  const payments = page.getByTestId('summary-table').locator('tr', { hasText: 'Payments' });
  await page.waitForFunction(
    (micros) => (globalThis as any).document.querySelector('[data-testid="summary-table"] tr:nth-child(2)')?.dataset.micros === micros,
    summary.json.micros.payments,
  );
  t.equal(microsOf(await payments.locator('td').textContent()), BigInt(summary.json.micros.payments), 'the summary’s payments');

  t.same(await seriousViolations(page), [], 'axe: credits and budgets');
  await fitsNarrowScreen(t, page, 'credits and budgets');
  sameOriginOnly(t, watched);
});

t.test('a top-up the API refuses, sent from the keyboard, shows its message at the amount field', async (t) => {
  const watched = await signedIn(t, 'credits-owner@example.com', '/console/credits');
  const { page } = watched;
  await page.getByLabel('Amount (USD)').fill('0.0000001');
  await page.getByLabel('Amount (USD)').press('Enter');
  const refused = await call('POST', '/credits/topup', { amountUsd: 0.0000001 });
  t.equal(refused.json.error.param, 'amountUsd', 'the API refuses it, naming amountUsd');
  const error = page.locator('#topup-amount-error');
  await error.waitFor();
  t.equal(await error.textContent(), refused.json.error.message, 'the API’s message, at the field its param names');
  t.equal(await page.getByLabel('Amount (USD)').getAttribute('aria-describedby'), 'topup-amount-error', 'and read out with the field');
  sameOriginOnly(t, watched);
});

t.test('an owner sets the account cap on the page; a member sees it disabled with the reason and the API refuses it forced', async (t) => {
  t.teardown(() => call('PATCH', '/budget', { accountCap: null }));
  const owner = await signedIn(t, 'credits-owner@example.com', '/console/credits');
  await owner.page.getByLabel('Cap on').selectOption({ label: 'The account' });
  await owner.page.getByLabel('Cap (USD)').fill('75.5');
  await owner.page.getByLabel('Per').selectOption('week');
  await owner.page.getByLabel('At the cap').selectOption('alert');
  await owner.page.getByRole('button', { name: 'Set cap' }).click();
  await owner.page.getByRole('status').getByText('Cap set on the account').waitFor();
  const budget = await call('GET', '/budget');
  t.same(budget.json.accountCap, { usd: 75.5, period: 'week', mode: 'alert' }, 'the API has the cap');
  await owner.page.locator('[data-scope="account"]').waitFor();
  sameOriginOnly(t, owner);

  const member = await signedIn(t, 'credits-member@example.com', '/console/credits');
  const { page, context } = member;
  const row = page.locator('[data-scope="account"]');
  await row.waitFor();
  t.match(await row.textContent(), /\$75\.50 per week/, 'the member sees the cap');
  t.ok(await page.getByLabel('Cap (USD)').isDisabled(), 'the cap field is disabled');
  t.ok(await page.getByRole('button', { name: 'Set cap' }).isDisabled(), 'so is setting it');
  t.ok(await page.getByText('Only an owner sets the account’s spend cap').isVisible(), 'with the reason');
  t.ok(await page.getByRole('button', { name: 'Record payment' }).isDisabled(), 'a top-up is disabled too');
  t.ok(await page.getByText('Only an owner tops up credit or redeems a code').first().isVisible(), 'with its reason');
  const session = (await (await context.request.get(`${base}/client/auth/session`)).json()) as { csrfToken: string };
  const forced = await context.request.patch(`${base}/client/budget`, { headers: { 'x-csrf-token': session.csrfToken }, data: { accountCap: null } });
  t.equal(forced.status(), 403, 'the API refuses the member anyway');
  t.equal(((await forced.json()) as Json).error.code, 'owner_required', 'as an owner’s act');
  t.same((await call('GET', '/budget')).json.accountCap, { usd: 75.5, period: 'week', mode: 'alert' }, 'and the cap is unchanged');
  t.same(await seriousViolations(page), [], 'axe: credits and budgets, as a member');
  sameOriginOnly(t, member);
});

t.test('a guardrail rule added on the settings page blocks a matching /v1 call, and edited to redact lets it through redacted', async (t) => {
  const key = await createKey(test, { name: 'guarded' });
  const watched = await signedIn(t, 'credits-owner@example.com', '/console/settings/guardrails');
  const { page } = watched;
  await page.getByRole('heading', { name: 'Data guardrails', level: 2 }).waitFor();
  const form = page.getByRole('form', { name: 'Add a rule' });
  await form.getByLabel('Name').fill('codename');
  await form.getByLabel('Detects').selectOption('pattern');
  await form.getByLabel('Pattern').fill('(');
  await form.getByRole('button', { name: 'Add rule' }).click();
  const invalid = page.locator('#new-rule-pattern-error');
  await invalid.waitFor();
  t.match(await invalid.textContent(), /^Invalid 'pattern'/, 'an invalid pattern: the API’s message at the pattern field');

  await form.getByLabel('Pattern').fill('(?i)bluebird');
  await form.getByLabel('On a match').selectOption('block');
  await form.getByRole('button', { name: 'Add rule' }).click();
  await page.getByRole('status').getByText('Rule added: codename').waitFor();
  const rules = (await call('GET', '/guardrails')).json.rules as Json[];
  t.same(
    rules.map((rule) => [rule.name, rule.detector, rule.pattern, rule.action, rule.enabled]),
    [['codename', 'pattern', '(?i)bluebird', 'block', true]],
    'the API has the rule',
  );
  t.same(await chat(key.key, 'Plans for Project BlueBird'), { status: 422, code: 'guardrail_blocked' }, 'a matching /v1 call is blocked');
  t.equal((await chat(key.key, 'Plans for the garden')).status, 200, 'another goes through');

  await page.getByLabel('Sample input (not stored)').fill('bluebird launch');
  await page.getByRole('button', { name: 'Try the enabled rules' }).click();
  const result = page.getByTestId('try-result');
  await result.waitFor();
  t.equal(await result.getAttribute('data-action'), 'block', 'the API’s decision: block');
  t.match(await result.textContent(), /blocked by codename/, 'trying a text shows the rule that blocks it');
  t.same(await seriousViolations(page), [], 'axe: guardrails');

  await page.getByRole('button', { name: 'Edit codename' }).click();
  const edit = page.getByRole('form', { name: 'Edit rule codename' });
  await edit.waitFor();
  t.ok(await edit.getByLabel('Name').evaluate((input) => input === (globalThis as any).document.activeElement), 'the keyboard goes to the edit form');
  await edit.getByLabel('On a match').selectOption('redact');
  await edit.getByRole('button', { name: 'Save rule' }).click();
  await page.getByRole('status').getByText('Rule saved: codename').waitFor();
  t.equal((await call('GET', '/guardrails')).json.rules[0].action, 'redact', 'the API has the rule redacting');
  await page.getByRole('button', { name: 'Try the enabled rules' }).click();
  await page.locator('[data-testid="try-result"][data-action="redact"]').waitFor();
  t.equal(await page.getByTestId('try-text-out').textContent(), '[REDACTED:codename] launch', 'trying a text shows it as it would go upstream');
  t.equal((await chat(key.key, 'Plans for Project BlueBird')).status, 200, 'a redacting rule lets the call through');

  await page.getByRole('button', { name: 'Delete codename' }).click();
  await page.getByRole('status').getByText('Rule deleted: codename').waitFor();
  t.same((await call('GET', '/guardrails')).json.rules, [], 'deleted on the page, the API has no rule left');
  sameOriginOnly(t, watched);
});

t.test('a member sees guardrail changes disabled with the reason', async (t) => {
  const watched = await signedIn(t, 'credits-member@example.com', '/console/settings/guardrails');
  const { page } = watched;
  const form = page.getByRole('form', { name: 'Add a rule' });
  await form.waitFor();
  t.ok(await form.getByLabel('Name').isDisabled(), 'the form is disabled');
  t.ok(await form.getByText('Only an owner changes guardrail rules').isVisible(), 'with the reason');
  t.ok(await page.getByRole('button', { name: 'Try the enabled rules' }).isEnabled(), 'trying a text is a read, open to a member');
  sameOriginOnly(t, watched);
});

t.test('the models section lists every model with its prices as the API gives them', async (t) => {
  const watched = await signedIn(t, 'credits-owner@example.com', '/console/settings/models');
  const { page } = watched;
  await page.getByTestId('model-table').waitFor();
  const models = (await call('GET', '/models')).json.data as Json[];
  t.same(
    await page.locator('[data-model-id]').evaluateAll((rows) => rows.map((row) => (row as any).dataset.modelId)),
    models.map((model) => model.id),
    'every model, in catalogue order',
  );
  const fields: Array<[string, string]> = [
    ['input', 'inputPerMTokUsd'],
    ['cachedInput', 'cachedInputPerMTokUsd'],
    ['cacheWrite', 'cacheWritePerMTokUsd'],
    ['output', 'outputPerMTokUsd'],
  ];
  for (const model of models) {
    for (const [cell, field] of fields) {
      const text = await page.locator(`[data-model-id="${model.id}"] [data-price="${cell}"]`).textContent();
      const price = model.prices[field] as number | null;
      if (price === null) t.equal(text, '—', `${model.id} ${field}: not priced`);
      else t.equal(microsOf(text), usdMicros(price), `${model.id} ${field}: ${price} USD per million tokens`);
    }
  }
  t.same(await seriousViolations(page), [], 'axe: models');
  await fitsNarrowScreen(t, page, 'models');
  sameOriginOnly(t, watched);
});

t.test('the connectors section shows the MCP URLs the service advertises', async (t) => {
  const watched = await signedIn(t, 'credits-owner@example.com', '/console/settings');
  const { page } = watched;
  await page.getByRole('link', { name: 'MCP connectors' }).click();
  await page.getByRole('heading', { name: 'MCP connectors', level: 2 }).waitFor();
  const root = (await (await fetch(`${base}/`)).json()) as Json;
  t.equal(await page.getByRole('textbox', { name: 'MCP URL (with a key)' }).inputValue(), `${base}${root.surfaces.mcp}`, 'the key endpoint on this host');
  t.equal(await page.getByRole('textbox', { name: 'MCP URL (sign in)' }).inputValue(), root.surfaces.connectorMcp, 'the sign-in endpoint on auth_url');
  t.same(await seriousViolations(page), [], 'axe: connectors');
  sameOriginOnly(t, watched);
});
