import { mkdtempSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import openapiTS from 'openapi-typescript';
import { parseConfig } from '../config/load.ts';
import { buildApp } from '../composition/build-app.ts';
import { manifest } from '../plugins/index.ts';
import { DEFAULT_CONSOLE_DIR } from '../plugins/console/index.ts';
import { bundleConsole, CONSOLE_SOURCE } from './console-bundle.ts';

/** The generated types the console's API client is checked against (committed; see README "Console"). */
export const SCHEMA_FILE = join(CONSOLE_SOURCE, 'api', 'schema.d.ts');

/**
 * The management API's OpenAPI document as the service serves it at /client/openapi.json, built
 * from the operation registry of an in-memory app with every plugin on: nothing listens, nothing
 * is written outside a temporary directory.
 */
export async function managementOpenApi(): Promise<Record<string, unknown>> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-openapi-'));
  const config = parseConfig({
    server: { logLevel: 'silent' },
    storage: { dataDir, database: { driver: 'pglite', dataDir: 'memory://' }, coordination: { driver: 'memory' } },
    bootstrap: { printOwnerToken: false },
    plugins: {
      ...Object.fromEntries(manifest.map((plugin) => [plugin.name, {}])),
      // Its own listener on a free port: a build beside a running service must not want the service's 8081.
      apps: { proxy: { port: 0 } },
    },
  });
  const app = await buildApp(config, { manifest });
  try {
    const response = await app.inject({ method: 'GET', url: '/client/openapi.json' });
    if (response.statusCode !== 200) throw new Error(`GET /client/openapi.json answered ${response.statusCode}`);
    return response.json();
  } finally {
    await app.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** console/api/schema.d.ts's text for a document: what openapi-typescript writes for it. */
export async function schemaTypes(document: Record<string, unknown>): Promise<string> {
  // biome-ignore lint/suspicious/noExplicitAny: openapi-typescript's own OpenAPI3 type; the document is the service's
  return openapiTS(document as any);
}

/**
 * `npm run build:console [-- outDir]`: the OpenAPI document, the API client's types from it, the bundle,
 * and its gzipped size (the budget is 80 KB for script and stylesheet together).
 */
async function main(args: readonly string[]): Promise<number> {
  const outDir = resolve(args[0] ?? DEFAULT_CONSOLE_DIR);
  const document = await managementOpenApi();
  await writeFile(SCHEMA_FILE, await schemaTypes(document));
  const built = await bundleConsole(outDir);
  const kb = (built.gzippedBytes / 1024).toFixed(1);
  process.stdout.write(`console: ${outDir} (script ${built.script}, stylesheet ${built.stylesheet}); ${kb} KB gzipped\n`);
  return built.gzippedBytes > 80 * 1024 ? 1 : 0;
}

if (process.argv[1] && resolve(process.argv[1]) === resolve(import.meta.filename)) {
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`console build failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
      process.exit(1);
    },
  );
}
