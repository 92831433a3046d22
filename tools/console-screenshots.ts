import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { build } from 'esbuild';
import type { FastifyInstance } from 'fastify';
import type { Browser, Page } from 'playwright-core';
import { launchChromium } from './chromium.ts';
import { parse as parseYaml } from 'yaml';
import { buildApp } from '../composition/build-app.ts';
import { parseConfig } from '../config/load.ts';
import { Tokens } from '../core/kernel/di-tokens.ts';
import { manifest } from '../plugins/index.ts';
import { MeteringTokens } from '../plugins/metering/index.ts';
import { bundleConsole, CONSOLE_SOURCE } from './console-bundle.ts';

/**
 * `npm run screenshots`: the console's pages as the README shows them. It builds the console, starts the
 * service in this process on loopback (the configuration `npm start` runs, on an in-memory database),
 * seeds an account through the public API, signs in through the sign-in form and captures every page of
 * console/layout.tsx's PAGES (detail pages through a seeded key and request) into docs/console/, then
 * rewrites the README's gallery between its markers. Pages come from PAGES, so a page added there is
 * captured on the next run; a detail page this tool has no seeded id for fails the run, naming it.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const OUT_DIR = join(ROOT, 'docs', 'console');
const README = join(ROOT, 'README.md');
const GALLERY_START = '<!-- console-screenshots:start (npm run screenshots writes this block) -->';
const GALLERY_END = '<!-- console-screenshots:end -->';

const VIEWPORT = { width: 1280, height: 800 } as const;
const NARROW = { width: 360, height: 780 } as const;
const HOUR = 3_600_000;
const MINUTE = 60_000;

const OWNER = { email: 'maria@northwind.example', name: 'Maria Alvarez', password: 'screenshots of the console' } as const;

/** The part of a console/layout.tsx PAGES entry this tool reads. */
interface ConsolePage {
  readonly title: string;
  readonly href: string;
  readonly routes: readonly string[];
}

interface Shot {
  readonly title: string;
  readonly file: string;
}

// biome-ignore lint/suspicious/noExplicitAny: the API's answers, read field by field as the seeding needs them
type Json = Record<string, any>;

/**
 * PAGES as the console has it: console/layout.tsx bundled for Node and imported, so the list is the
 * one the navigation is built from (its components are only defined, never rendered, here).
 */
async function consolePages(): Promise<readonly ConsolePage[]> {
  const bundled = await build({
    entryPoints: [join(CONSOLE_SOURCE, 'layout.tsx')],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'node',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    logLevel: 'warning',
  });
  const code = bundled.outputFiles[0]!.text;
  const layout = (await import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`)) as { PAGES: readonly ConsolePage[] };
  return layout.PAGES.map(({ title, href, routes }) => ({ title, href, routes }));
}

/** The service's clock: the seed moves it back to spread calls over hours, then returns it to now. */
class SeedClock {
  offsetMs = 0;
  readonly now = (): Date => new Date(Date.now() + this.offsetMs);
}

interface Service {
  app: FastifyInstance;
  base: string;
  clock: SeedClock;
  ownerToken: string;
  setPasswordToken: string;
  /** Run before the service closes (the seeded webhook's receiver). */
  onClose: Array<() => Promise<void>>;
  close(): Promise<void>;
}

/** The configuration `npm start` runs (config/default.yaml), in memory, quiet, serving the given console build. */
function screenshotConfig(dataDir: string, consoleDir: string) {
  const raw = parseYaml(readFileSync(join(ROOT, 'config', 'default.yaml'), 'utf8')) as Json;
  return parseConfig(
    {
      ...raw,
      server: { ...raw.server, logLevel: 'silent' },
      storage: { dataDir, database: { driver: 'pglite', dataDir: 'memory://' }, coordination: { driver: 'memory' } },
      bootstrap: { organizationName: 'Northwind Labs', ownerEmail: OWNER.email, ownerName: OWNER.name, printOwnerToken: false },
      // The seeded webhook delivers to a receiver this tool runs on loopback.
      outbound: { ...raw.outbound, allowPrivateNetwork: true },
      plugins: {
        ...raw.plugins,
        console: { dir: consoleDir },
        // The agent's destructive call waits for a person for as long as the screenshots take.
        'tool-gateway': { ...raw.plugins['tool-gateway'], approvalWaitMs: 600_000 },
        // The apps proxy on a free port, so the screenshots run beside a service on 8081.
        apps: { ...raw.plugins.apps, proxy: { ...raw.plugins.apps?.proxy, port: 0 } },
      },
    },
    // No environment: the screenshots do not depend on the machine's SVC_* or DATABASE_URL.
    {},
  );
}

async function startService(consoleDir: string): Promise<Service> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-screenshots-'));
  const clock = new SeedClock();
  const app = await buildApp(screenshotConfig(dataDir, consoleDir), { manifest, clock: clock.now });
  await app.ready();
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (!address || typeof address !== 'object') throw new Error('the service is not listening');
  const bootstrap = app.svc.bootstrap;
  if (!bootstrap) throw new Error('the service did not create its first organisation');
  const onClose: Service['onClose'] = [];
  return {
    app,
    base: `http://127.0.0.1:${address.port}`,
    clock,
    ownerToken: bootstrap.ownerToken,
    setPasswordToken: bootstrap.setPasswordToken,
    onClose,
    async close() {
      for (const closing of onClose) await closing();
      await app.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** One management API call as the owner; anything but the expected status stops the run. */
async function client(service: Service, method: string, url: string, body?: unknown, expect = method === 'POST' ? [200, 201] : [200]): Promise<Json> {
  const response = await service.app.inject({
    method: method as 'GET',
    url: `/client${url}`,
    headers: { authorization: `Bearer ${service.ownerToken}` },
    ...(body === undefined ? {} : { payload: body as object }),
  });
  if (!expect.includes(response.statusCode)) throw new Error(`${method} /client${url} answered ${response.statusCode}: ${response.body}`);
  return response.json() as Json;
}

/** A /v1 chat completion with a key; its status (a guardrail's refusal is part of the story). */
async function chat(service: Service, key: string, model: string, content: string): Promise<number> {
  const response = await service.app.inject({
    method: 'POST',
    url: '/v1/chat/completions',
    headers: { authorization: `Bearer ${key}` },
    payload: { model, messages: [{ role: 'user', content }] },
  });
  return response.statusCode;
}

const PROMPTS = [
  'Summarise this support ticket in two sentences: the customer cannot export invoices as PDF since Monday.',
  'Draft a friendly reply confirming the refund for order 10482.',
  'Classify the sentiment of: "Delivery was late again, but the support team was great."',
  'Translate to German: "Your subscription renews on the first of each month."',
  'Extract the company names from: "Contoso signed with Fabrikam after the Litware pilot."',
  'Write a SQL query that counts orders per customer for the last 30 days.',
  'Give three subject lines for the April product newsletter.',
] as const;

/**
 * The conversation a call carries along, repeated: real calls send thousands of tokens of context,
 * which puts an hour's cost in cents (the charts' axes then read in cents, not in fractions of one).
 */
const THREAD =
  'Customer: the export button greys out after I pick a date range longer than a month. ' +
  'Agent: thanks, could you tell me which browser you use and whether the same happens for a shorter range? ' +
  'Customer: Firefox on Windows; a week works, five weeks does not. ';

/** Calls per hour over the last day and a bit, oldest first: quiet nights, busy working hours. */
const CALLS_PER_HOUR = [2, 1, 1, 1, 2, 3, 5, 7, 8, 9, 8, 6, 7, 8, 9, 7, 5, 4, 3, 3, 2, 2, 3, 5, 7, 8, 6] as const;

interface Seeded {
  keyId: string;
  appId: string;
  requestId: string;
  webhookId: string;
  /** Settles when the agent's call that waits for approval is answered. */
  waitingCall: Promise<unknown>;
  agent: Client;
}

/** An account with some history, made through the public API only (the clock stands in for the hours passing). */
async function seed(service: Service): Promise<Seeded> {
  const { clock } = service;
  await client(service, 'POST', '/auth/set-password', { token: service.setPasswordToken, password: OWNER.password });

  clock.offsetMs = -(CALLS_PER_HOUR.length + 2) * HOUR;
  const defaultProject = ((await client(service, 'GET', '/projects')).data as Json[])[0]!;
  await client(service, 'PATCH', `/projects/${defaultProject.id}`, { name: 'Customer support' });
  const analytics = await client(service, 'POST', '/projects', { name: 'Analytics' });
  const production = await client(service, 'POST', '/keys', {
    name: 'production backend',
    scopes: ['inference', 'usage:read'],
    spendCap: { usd: 50, period: 'month', mode: 'alert' },
  });
  const staging = await client(service, 'POST', '/keys', { name: 'staging backend' });
  const pipeline = await client(service, 'POST', '/keys', { name: 'nightly reports', projectId: analytics.id, models: ['mock-small'] });
  const agent = await client(service, 'POST', '/keys', { name: 'support agent', scopes: ['inference', 'mcp:read', 'mcp:write'] });
  await client(service, 'POST', '/keys', { name: 'laptop (Maria)' });
  await client(service, 'POST', '/log-requests', { enabled: true });
  await client(service, 'POST', '/guardrails/rules', { name: 'codename', detector: 'pattern', pattern: '(?i)project bluebird', action: 'block' });
  await client(service, 'POST', '/guardrails/rules', { name: 'customer emails', detector: 'email', action: 'redact' });

  let made = 0;
  for (const [index, calls] of CALLS_PER_HOUR.entries()) {
    const hourStart = -(CALLS_PER_HOUR.length - index) * HOUR;
    if (index === 6) {
      clock.offsetMs = hourStart;
      await client(service, 'POST', '/credits/topup', { amountUsd: 200, reference: 'INV-2025-0417', note: 'Bank transfer' });
    }
    for (let call = 0; call < calls; call++) {
      clock.offsetMs = hourStart + Math.floor((call * 55 * MINUTE) / calls) + MINUTE;
      const prompt = `${PROMPTS[made % PROMPTS.length]!}\n\n${THREAD.repeat(40 + (made % 9) * 15)}`;
      made++;
      // Mostly the small model from production; the large one for every third call; staging and the pipeline now and then.
      const [key, model] = made % 7 === 0 ? [staging.key, 'mock-small'] : made % 5 === 0 ? [pipeline.key, 'mock-small'] : [production.key, made % 3 === 0 ? 'mock-large' : 'mock-small'];
      await chat(service, key, model, prompt);
    }
    if (index === 20) await chat(service, staging.key, 'mock-small', 'Write the launch FAQ for Project Bluebird.');
  }
  clock.offsetMs = -10 * MINUTE;
  await chat(service, production.key, 'mock-large', 'Reply to jane.doe@example.com that her invoice was resent.');
  clock.offsetMs = 0;

  const webhookId = await webhookWithDeliveries(service);
  const appId = await deployedApp(service);
  const agentClient = await toolGateway(service, agent);
  const waitingCall = agentClient.callTool({ name: 'demo__notes_delete', arguments: { id: 'draft-reply-10482' } }, undefined, { timeout: 900_000 }).catch((error: unknown) => error);
  // Both are written in batches behind the calls: write them now rather than wait for their timers.
  const { container } = service.app.svc;
  await container.resolve(MeteringTokens.Writer).flush();
  await container.resolve(Tokens.Authenticator).flushKeyUsage();
  const newest = (await client(service, 'GET', '/requests?limit=5')).data as Json[];
  const request = newest.find((row) => row.status === 200);
  if (!request) throw new Error('the request log is empty after seeding');
  return { keyId: production.id, appId, requestId: request.id, webhookId, waitingCall, agent: agentClient };
}

const run = promisify(execFile);

/** A small node app with an example env file, as the apps page's deploy shows it. */
const STOREFRONT: Record<string, string> = {
  'package.json': '{"name":"storefront","scripts":{"start":"node server.js"}}\n',
  '.env.example': 'STRIPE_KEY=\n',
  'server.js': [
    "const http = require('node:http');",
    "const server = http.createServer((req, res) => res.end('storefront'));",
    "server.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('storefront listening'));",
    "process.on('SIGTERM', () => server.close());",
    '',
  ].join('\n'),
};

/** An app deployed as a person does it: a repository of the git host, a push with the system's git, a deploy. */
async function deployedApp(service: Service): Promise<string> {
  await client(service, 'POST', '/githost/repos', { name: 'storefront' });
  const deploys = await client(service, 'POST', '/keys', { name: 'deploys', scopes: ['apps:deploy', 'apps:read'] });
  const work = mkdtempSync(join(tmpdir(), 'svc-screenshots-app-'));
  try {
    for (const [name, content] of Object.entries(STOREFRONT)) writeFileSync(join(work, name), content);
    const credentials = ['-c', `credential.helper=!f() { echo username=deploy; echo password=${deploys.key}; }; f`];
    const identity = ['-c', 'user.name=Maria', '-c', 'user.email=maria@example.com'];
    const env = { PATH: process.env.PATH, HOME: work, GIT_CONFIG_NOSYSTEM: '1', GIT_TERMINAL_PROMPT: '0' };
    for (const args of [
      ['init', '--quiet', '--initial-branch=main'],
      ['add', '.'],
      ['commit', '--quiet', '-m', 'Storefront'],
    ]) {
      await run('git', [...identity, ...args], { cwd: work, env });
    }
    const pushUrl = `${service.base}/git/${((await client(service, 'GET', '/whoami')).account as Json).id}/storefront.git`;
    await run('git', [...credentials, 'push', '--quiet', pushUrl, 'main'], { cwd: work, env });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  const accepted = await client(service, 'POST', '/apps/githost', { repo: 'storefront' }, [202]);
  const appId = String((accepted.app as Json).id);
  for (const until = Date.now() + 120_000; Date.now() < until; await new Promise((done) => setTimeout(done, 250))) {
    const progress = await client(service, 'GET', `/apps/${appId}/progress`);
    if (progress.done) return appId;
  }
  throw new Error('the seeded app did not finish deploying in two minutes');
}

/** A webhook endpoint on a loopback receiver that answers 200, with a test event delivered to it. */
async function webhookWithDeliveries(service: Service): Promise<string> {
  const receiver = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(200, { 'content-type': 'application/json' }).end('{"received":true}'));
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  service.onClose.push(() => new Promise<void>((resolve) => receiver.close(() => resolve())));
  const { port } = receiver.address() as AddressInfo;
  const hook = await client(service, 'POST', '/webhooks', {
    url: `http://127.0.0.1:${port}/hooks/svc`,
    description: 'Billing alerts to the ops channel',
    eventTypes: ['budget.threshold_reached', 'budget.cap_reached', 'credit.low', 'key.created'],
  });
  await client(service, 'POST', `/webhooks/${hook.id}/test`);
  return hook.id as string;
}

/** The demo upstream, its tools on and bundled for the agent key, and a few of the agent's calls. */
async function toolGateway(service: Service, agent: Json): Promise<Client> {
  const upstream = await client(service, 'POST', '/mcp/upstreams', { name: 'Demo tools', slug: 'demo', transport: 'demo' });
  const ids = ((await client(service, 'GET', `/mcp/tools?upstreamId=${upstream.id}`)).data as Json[]).map((tool) => tool.id as string);
  await client(service, 'POST', '/mcp/tools/approve', { ids });
  const group = await client(service, 'POST', '/mcp/groups', { name: 'support tools' });
  await client(service, 'PUT', `/mcp/groups/${group.id}/tools`, { toolIds: ids });
  await client(service, 'POST', '/mcp/grants', { groupId: group.id, keyId: agent.id });
  const mcp = new Client({ name: 'support-agent', version: '1.0.0' });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${service.base}/mcp/gateway`), { requestInit: { headers: { authorization: `Bearer ${agent.key}` } } }));
  await mcp.callTool({ name: 'demo__add', arguments: { a: 1280, b: 800 } });
  await mcp.callTool({ name: 'demo__notes_create', arguments: { title: 'Refund 10482', body: 'Approved by support.' } });
  await mcp.callTool({ name: 'demo__current_time', arguments: {} });
  return mcp;
}

/** The page's data is in: its heading, no "Loading …" left, nothing more in flight; an error banner stops the run. */
async function settled(page: Page, what: string): Promise<void> {
  await page.locator('main h1').first().waitFor();
  // No "Loading …" status left: every part of the page has its answer.
  await page
    .locator('[role="status"]', { hasText: /^Loading/ })
    .first()
    .waitFor({ state: 'detached' });
  await page.waitForLoadState('networkidle');
  const alerts = await page.locator('[role="alert"]:visible').allTextContents();
  if (alerts.length > 0) throw new Error(`${what} shows an error: ${alerts.join(' | ')}`);
  const overflow = await page.evaluate(() => {
    const view = globalThis as unknown as { innerWidth: number; document: { documentElement: { scrollWidth: number } } };
    return view.document.documentElement.scrollWidth - view.innerWidth;
  });
  if (overflow > 0) throw new Error(`${what} is ${overflow} px wider than the window`);
}

/** What a page shows only once the seed's data reached it, beyond what settled() waits for. */
const PAGE_READY: Record<string, (page: Page) => Promise<void>> = {
  // Hourly buckets: the seeded day has a shape (the daily view folds it into one or two points).
  '/console/usage': async (page) => {
    await page.getByTestId('usage-table').waitFor();
    await page.getByLabel('Buckets').selectOption('hour');
    await page.locator('caption', { hasText: 'Usage per hour' }).waitFor();
    await page.locator('main h1').hover();
  },
  // The approvals queue is polled: wait for the agent's call to be in it.
  '/console/tools': (page) => page.getByTestId('waiting-table').waitFor({ timeout: 15_000 }),
};

/** The file a page's screenshot is written to: docs/console/<title in kebab case>.png. */
const fileOf = (title: string) =>
  `${title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '')}.png`;

async function shoot(browser: Browser, base: string, pages: readonly ConsolePage[], ids: Record<string, string>): Promise<{ shots: Shot[]; missing: string[] }> {
  // A fixed zone and locale: the times on the pages read the same whoever runs it.
  const context = await browser.newContext({ viewport: VIEWPORT, deviceScaleFactor: 1, locale: 'en-GB', timezoneId: 'UTC', colorScheme: 'light', reducedMotion: 'reduce' });
  const page = await context.newPage();
  const shots: Shot[] = [];
  const missing: string[] = [];
  const capture = async (title: string, file = fileOf(title)) => {
    await page.screenshot({ path: join(OUT_DIR, file), animations: 'disabled', caret: 'hide' });
    shots.push({ title, file });
    process.stdout.write(`  ${file}\n`);
  };

  await page.goto(`${base}/console/sign-in`);
  await page.getByRole('heading', { name: 'Sign in' }).waitFor();
  await capture('Sign in');
  await page.getByLabel('Email').fill(OWNER.email);
  await page.getByLabel('Password').fill(OWNER.password);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('heading', { name: 'Overview', level: 1 }).waitFor();

  for (const entry of pages) {
    const detail = entry.routes.find((route) => route.includes('/:'));
    const path = entry.href !== '' ? entry.href : detail && ids[detail] ? detail.replace(/:[a-z]+/i, encodeURIComponent(ids[detail]!)) : null;
    if (path === null) {
      missing.push(`${entry.title} (${entry.routes.join(', ')})`);
      continue;
    }
    await page.goto(`${base}${path}`);
    await PAGE_READY[path]?.(page);
    await settled(page, `${entry.title} (${path})`);
    await capture(entry.title);
  }

  await page.setViewportSize(NARROW);
  await page.goto(`${base}/console/`);
  await settled(page, 'Overview at 360 px');
  await capture('Overview at 360 px', 'overview-360.png');
  await context.close();
  return { shots, missing };
}

/** The README's gallery: two screenshots a row, each under its page's name. */
function gallery(shots: readonly Shot[]): string {
  const rows: string[] = [];
  for (let i = 0; i < shots.length; i += 2) {
    const pair = shots.slice(i, i + 2);
    const cells = pair.map((shot) => `<td valign="top"><b>${shot.title}</b><br><img src="docs/console/${shot.file}" alt="Console: ${shot.title}" width="400"></td>`);
    rows.push(`<tr>${cells.join('')}</tr>`);
  }
  return `${GALLERY_START}\n<table>\n${rows.join('\n')}\n</table>\n${GALLERY_END}`;
}

async function writeGallery(shots: readonly Shot[]): Promise<void> {
  const text = await readFile(README, 'utf8');
  const start = text.indexOf(GALLERY_START);
  const end = text.indexOf(GALLERY_END);
  if (start < 0 || end < start) throw new Error(`README.md has no gallery markers (${GALLERY_START} … ${GALLERY_END})`);
  await writeFile(README, text.slice(0, start) + gallery(shots) + text.slice(end + GALLERY_END.length));
}

/** Screenshots of pages that are gone would linger in the README's folder: only this run's remain. */
async function removeStale(shots: readonly Shot[]): Promise<void> {
  const kept = new Set(shots.map((shot) => shot.file));
  for (const name of await readdir(OUT_DIR)) if (name.endsWith('.png') && !kept.has(name)) await rm(join(OUT_DIR, name));
}

async function main(): Promise<number> {
  const consoleDir = mkdtempSync(join(tmpdir(), 'svc-screenshots-console-'));
  let service: Service | null = null;
  let browser: Browser | null = null;
  let seeded: Seeded | null = null;
  try {
    const [pages] = await Promise.all([consolePages(), bundleConsole(consoleDir)]);
    service = await startService(consoleDir);
    seeded = await seed(service);
    await mkdir(OUT_DIR, { recursive: true });
    browser = await launchChromium(['--hide-scrollbars']);
    process.stdout.write(`screenshots of ${pages.length} pages into ${OUT_DIR}:\n`);
    const { shots, missing } = await shoot(browser, service.base, pages, {
      '/console/keys/:id': seeded.keyId,
      '/console/apps/:id': seeded.appId,
      '/console/requests/:id': seeded.requestId,
      '/console/webhooks/:id': seeded.webhookId,
    });
    await removeStale(shots);
    await writeGallery(shots);
    // The agent's call ends denied, so the service closes with nothing in flight.
    const [waiting] = (await client(service, 'GET', '/mcp/approvals/waiting')).data as Json[];
    if (waiting) await client(service, 'POST', `/mcp/approvals/${waiting.id}/deny`, { reason: 'Screenshots taken' });
    await seeded.waitingCall;
    if (missing.length > 0) {
      process.stderr.write(`no seeded id for these detail pages, so no screenshot: ${missing.join('; ')} (add one in tools/console-screenshots.ts)\n`);
      return 1;
    }
    return 0;
  } finally {
    // Closing the agent's connection first also ends a call still waiting (a run that stopped early).
    await seeded?.agent.close();
    await browser?.close();
    await service?.close();
    rmSync(consoleDir, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`screenshots failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}
