import { readFile } from 'node:fs/promises';
import t from 'tap';
import { TEST_BATCHES, chatLine, uploadLines, untilEnded } from '../../helpers/batches.ts';
import { startGateway } from '../../helpers/gateway.ts';
import { connectorToken, onAuthHost } from '../../helpers/oauth.ts';
import { consoleBrowser, personWithPassword, sameOriginOnly, seriousViolations, signInThroughThePage } from './browser-fixture.ts';
import { builtConsole } from './console-fixture.ts';

/**
 * The gateway settings page's Batches section and its connected MCP clients, in a real browser
 * against the real service on loopback: a batch made through /v1 with a key shows with its
 * progress and downloads the bytes /v1 answers; a connector that signed in is listed and Revoke ends it.
 */
t.setTimeout(180_000);

const { dir } = await builtConsole(t);
const gateway = await startGateway(t, {
  inferenceModels: { solo: { batch: true } },
  // A line held upstream stays running until the test lets it answer, rather than timing out and retrying.
  inference: {
    timeouts: { connectMs: 500, firstByteMs: 120_000, totalMs: 120_000 },
    failover: { initialBackoffMs: 5, maxBackoffMs: 20, deadlineMs: 120_000, ttftTimeoutMs: 120_000, maxRetryAfterMs: 1_500 },
  },
  plugins: { batches: TEST_BATCHES, console: { dir } },
  config: { auth: { credentialCacheTtlMs: 60_000 } },
});
const { test, url: base } = gateway;
const browser = consoleBrowser(t, base);
await personWithPassword(test, 'batches-owner@example.com', 'owner');

async function signedIn(t: Parameters<typeof browser.watchedContext>[0], path: string) {
  const watched = await browser.watchedContext(t);
  await watched.page.goto(`${base}${path}`);
  await signInThroughThePage(watched.page, 'batches-owner@example.com');
  return watched;
}

t.test('a batch made through /v1 shows its progress while it runs, then downloads the bytes of /v1/batches/{id}/content', async (t) => {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  t.teardown(() => release());
  gateway.primary.enqueue({ kind: 'reply', holdUntil: held });
  const inputFileId = await uploadLines(gateway, [chatLine('first'), chatLine('second')]);
  const { id } = await gateway.client.batches.create({ input_file_id: inputFileId, endpoint: '/v1/chat/completions', completion_window: '24h' });
  await gateway.primary.arrived(2);

  const watched = await signedIn(t, '/console/settings/batches');
  const { page } = watched;
  const row = page.locator(`tr[data-batch-id="${id}"]`);
  await row.waitFor();
  t.equal(await row.getAttribute('data-status'), 'in_progress', 'shown running');
  t.match(await row.getByTestId('batch-counts').textContent(), /of 2 requests done/);
  t.equal(await row.getByRole('button', { name: /Download the output/ }).count(), 0, 'no output while it runs');
  t.same(await seriousViolations(page), [], 'no serious accessibility findings');

  release();
  await untilEnded(gateway, id);
  // No reload: the section asks again every few seconds while a batch runs.
  await page.locator(`tr[data-batch-id="${id}"][data-status="completed"]`).waitFor({ timeout: 30_000 });
  t.equal(await row.getByTestId('batch-counts').textContent(), '2 of 2 requests done', 'its progress, from the counts');
  t.equal(await row.locator('progress').getAttribute('value'), '2');

  const downloading = page.waitForEvent('download');
  await row.getByRole('button', { name: `Download the output of batch ${id}` }).click();
  const download = await downloading;
  t.match(download.suggestedFilename(), /^batch_.*_output\.jsonl$/);
  const bytes = await readFile((await download.path())!);
  const v1 = await fetch(`${base}/v1/batches/${id}/content`, { headers: { authorization: `Bearer ${gateway.key}` } });
  t.same(bytes, Buffer.from(await v1.arrayBuffer()), 'byte for byte what /v1 answers');
  t.equal(bytes.toString('utf8').trim().split('\n').length, 2, 'one line per request');
  sameOriginOnly(t, watched);
});

t.test('a connector signed in over OAuth is listed among the connected clients, and Revoke ends it', async (t) => {
  const auth = onAuthHost(test, 'http://auth.localhost:8080');
  const token = await connectorToken(auth, { scope: 'mcp:read' });
  const mcp = () =>
    auth.auth('POST', '/mcp', {
      json: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
      headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream' },
    });
  t.equal((await mcp()).statusCode, 200, 'connected');

  const watched = await signedIn(t, '/console/settings/connectors');
  const { page } = watched;
  const table = page.getByTestId('connection-table');
  await table.waitFor();
  const row = table.locator('tbody tr').filter({ hasText: 'Test connector' });
  t.equal(await row.count(), 1, 'listed');
  t.match(await row.textContent(), /client\.example/, 'with where it sends people back to');
  t.match(await row.textContent(), /mcp:read/, 'and its scopes');
  t.same(await seriousViolations(page), [], 'no serious accessibility findings');

  await row.getByRole('button', { name: 'Revoke Test connector' }).click();
  await page.getByRole('status').filter({ hasText: 'Revoked: Test connector' }).waitFor();
  t.equal((await mcp()).statusCode, 401, "the connector's next /mcp call is refused");
  await page.getByText('No connector is signed in.').waitFor();
  sameOriginOnly(t, watched);
});
