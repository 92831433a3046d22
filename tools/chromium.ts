import { type Browser, chromium } from 'playwright-core';

/** Debian's chromium (`apt-get install chromium`; .ci/run installs it): no browser download. */
export const CHROMIUM = '/usr/bin/chromium';

/**
 * The one way the project starts a browser (browser tests, the screenshots, the console's bench):
 * headless, no sandbox (CI runs as root), and nothing that phones home or updates itself, so every
 * request a page makes is the page's own.
 */
export function launchChromium(extraArgs: readonly string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', ...extraArgs],
  });
}
