import AxeBuilder from '@axe-core/playwright';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchChromium } from '../../../tools/chromium.ts';
import type { Test } from 'tap';
import type { TapLike, TestApp } from '../../helpers/app.ts';
import { invite, PASSWORD } from '../../helpers/people.ts';

/**
 * Debian's chromium driven by playwright-core (no browser download), one per test file, and the
 * checks every console page shares: every request to the service's own origin, no script that ran
 * from data, and axe's serious and critical findings.
 */
export interface Watched {
  context: BrowserContext;
  page: Page;
  /** Requests the page tried to send anywhere but the service: each one fails the test. */
  elsewhere: string[];
  /** alert/prompt dialogs (script that ran); confirmations are accepted. */
  alerts: string[];
}

export interface ConsoleBrowser {
  /** A fresh browser context whose every request must go to the service's own origin. */
  watchedContext(t: Test): Promise<Watched>;
}

export function consoleBrowser(t: TapLike, base: string): ConsoleBrowser {
  let browser: Browser | null = null;
  t.teardown(() => browser?.close());
  return {
    async watchedContext(t) {
      browser ??= await launchChromium();
      const context = await browser.newContext();
      t.teardown(() => context.close());
      const elsewhere: string[] = [];
      await context.route('**', (route) => {
        const url = route.request().url();
        if (new URL(url).origin === base || url.startsWith('data:')) return route.continue();
        elsewhere.push(url);
        return route.abort();
      });
      const page = await context.newPage();
      const alerts: string[] = [];
      page.on('dialog', (dialog) => {
        if (dialog.type() === 'confirm') return void dialog.accept();
        alerts.push(`${dialog.type()}: ${dialog.message()}`);
        return void dialog.dismiss();
      });
      return { context, page, elsewhere, alerts };
    },
  };
}

/** A person of the test organisation with the shared test password. */
export async function personWithPassword(test: TestApp, email: string, role: 'owner' | 'admin' | 'member'): Promise<void> {
  const token = await invite(test, email, role);
  const set = await test.call('POST', '/client/auth/set-password', { token: null, body: { token, password: PASSWORD } });
  if (set.statusCode !== 200) throw new Error(`set-password failed: ${set.body}`);
}

export async function signInThroughThePage(page: Page, email: string): Promise<void> {
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

export async function seriousViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** Run at each test's end: the route guard saw nothing leave for another origin. */
export function sameOriginOnly(t: Test, watched: Watched): void {
  t.same(watched.elsewhere, [], 'every request went to the service’s own origin');
}
