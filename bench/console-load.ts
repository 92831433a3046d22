/**
 * Section 10 of `npm run bench`: the web console's weight and its first load. The bundle is built
 * as `npm run build` builds it (tools/console-bundle.ts) into a scratch directory the gateway child
 * serves (BENCH_CONSOLE_DIR); its gzipped script and stylesheet are what a first visit downloads.
 * The first load is Debian's chromium (playwright-core, headless) opening /console/ in a fresh
 * browser context each time (no cache, no service worker), signed in as the owner through the sign-in form's call
 * cookie (consoleSignIn), from navigation start to the overview's figures in the page: the moment a MutationObserver
 * installed before any page script sees them, on the page's own clock. Skipped, saying so, on a
 * machine without /usr/bin/chromium.
 */
import { existsSync } from 'node:fs';
import { CHROMIUM, launchChromium } from '../tools/chromium.ts';
import { SESSION_COOKIE } from '../core/http/session-cookie.ts';
import { bundleConsole } from '../tools/console-bundle.ts';

export const CONSOLE_LOADS = 5;
export const CONSOLE_GOALS = { gzippedKiB: 80, firstLoadMs: 300 };

export interface ConsoleBundle {
  dir: string;
  gzippedBytes: number;
}

export interface ConsoleLoad {
  /** Navigation start to the overview's figures shown, one per fresh context, in order. */
  firstLoadMs: number[];
}

export async function buildConsoleBundle(dir: string): Promise<ConsoleBundle> {
  const built = await bundleConsole(dir);
  return { dir, gzippedBytes: built.gzippedBytes };
}

/** Times when the overview's figures appear, recorded in the page before its own script runs. */
const MARK_FIGURES_SHOWN = `
  new MutationObserver((_, observer) => {
    if (document.querySelector('[data-testid="overview-figures"]')) {
      window.__figuresShownAt = performance.now();
      observer.disconnect();
    }
  }).observe(document, { childList: true, subtree: true });
`;

export async function measureConsoleLoad(base: string, sessionCookie: string, loads = CONSOLE_LOADS): Promise<ConsoleLoad | null> {
  if (!existsSync(CHROMIUM)) return null;
  const browser = await launchChromium();
  try {
    const firstLoadMs: number[] = [];
    // One warm-up load: the gateway's first answers of these routes compile code the later ones reuse.
    for (let load = 0; load <= loads; load++) {
      const context = await browser.newContext();
      try {
        await context.addCookies([{ name: SESSION_COOKIE, value: sessionCookie, url: base }]);
        await context.addInitScript(MARK_FIGURES_SHOWN);
        const page = await context.newPage();
        await page.goto(`${base}/console/`);
        await page.waitForFunction(() => (globalThis as { __figuresShownAt?: number }).__figuresShownAt !== undefined, undefined, { timeout: 30_000 });
        const shownAt = await page.evaluate(() => (globalThis as { __figuresShownAt?: number }).__figuresShownAt!);
        if (load > 0) firstLoadMs.push(shownAt);
      } finally {
        await context.close();
      }
    }
    return { firstLoadMs };
  } finally {
    await browser.close();
  }
}

const BENCH_PASSWORD = 'bench console password 1';

/**
 * A signed-in browser session for the owner, as a person gets one: the first start's set-password
 * token, then the sign-in form's call. Returns the session cookie's value.
 */
export async function consoleSignIn(base: string, setPasswordToken: string, email = 'owner@example.com'): Promise<string> {
  const post = (path: string, body: unknown) => fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', origin: base }, body: JSON.stringify(body) });
  const set = await post('/client/auth/set-password', { token: setPasswordToken, password: BENCH_PASSWORD });
  if (!set.ok) throw new Error(`set-password answered ${set.status}: ${await set.text()}`);
  const signedIn = await post('/client/auth/sign-in', { email, password: BENCH_PASSWORD });
  if (!signedIn.ok) throw new Error(`sign-in answered ${signedIn.status}: ${await signedIn.text()}`);
  const cookie = signedIn.headers
    .getSetCookie()
    .map((line) => line.split(';')[0]!)
    .find((pair) => pair.startsWith(`${SESSION_COOKIE}=`));
  if (!cookie) throw new Error('sign-in set no session cookie');
  return cookie.slice(SESSION_COOKIE.length + 1);
}
