import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';

/**
 * What the production build (`npm run build`, run by `npm run start:prod`) loads when it starts:
 * only what every process needs. A database or coordination driver the config does not choose, the
 * SMTP transport, the media libraries, the tracing SDK and the MCP SDK are tens of MiB of memory, so they are imported on use;
 * and an import on use inside the bundle stays one only if the build splits it into its own chunk.
 */
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** Packages a process imports only for a choice in its config or a call it may never get. */
const IMPORTED_ON_USE = [
  'redis',
  'pg',
  '@electric-sql/pglite',
  'nodemailer',
  'music-metadata',
  'pngjs',
  // The tracing SDK and its OTLP exporter: only when tracing is configured (core/observability/tracing.ts).
  '@opentelemetry/sdk-trace-base',
  '@opentelemetry/exporter-trace-otlp-http',
  '@opentelemetry/resources',
  '@opentelemetry/semantic-conventions',
  // The MCP SDK: on the first request to /mcp or /mcp/gateway, or the first call to a customer's tool server.
  '@modelcontextprotocol/sdk',
];

/** `npm run build` as package.json has it, writing to `outdir` instead of dist/. */
async function build(outdir: string): Promise<void> {
  const script = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts['build']!;
  const [command, ...args] = script.split(/\s+/);
  if (command !== 'esbuild') throw new Error(`the build script no longer starts with esbuild: ${script}`);
  const redirected = args.map((arg) => (arg.startsWith('--outdir=') ? `--outdir=${outdir}` : arg));
  await promisify(execFile)(join(ROOT, 'node_modules/.bin/esbuild'), redirected, { cwd: ROOT });
}

/** Static imports and re-exports at the top of an emitted module (not `import()`). */
const STATIC_IMPORT = /^(?:import|export)\s(?:[^'";]*?\sfrom\s*)?["']([^"']+)["']/gm;

function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]!;
}

/** `import("./chunk.mjs")` in an emitted module. */
const DYNAMIC_IMPORT = /\bimport\(\s*["'](\.\/[^"']+)["']\s*\)/g;

/**
 * Every package a serving process loads at start: the entry's static imports, through its chunks, and
 * the app the entry imports when it serves (main.ts imports it on use, so a cluster's primary, which
 * serves nothing, does not load it). Imports on use inside the app stay out.
 */
function packagesLoadedAtStart(outdir: string, entry: string): Set<string> {
  const packages = new Set<string>();
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const [, specifier] of readFileSync(join(outdir, file), 'utf8').matchAll(STATIC_IMPORT)) {
      if (specifier!.startsWith('./')) visit(specifier!.slice(2));
      else if (!specifier!.startsWith('node:')) packages.add(packageOf(specifier!));
    }
  };
  visit(entry);
  for (const [, specifier] of readFileSync(join(outdir, entry), 'utf8').matchAll(DYNAMIC_IMPORT)) visit(specifier!.slice(2));
  return packages;
}

/** The build, made once for the tests below and removed after them (also when it failed). */
let outdir: string | undefined;
let building: Promise<string> | undefined;
function built(t: Test): Promise<string> {
  t.setTimeout(120_000);
  if (!building) {
    const dir = mkdtempSync(join(tmpdir(), 'svc-build-'));
    outdir = dir;
    building = build(dir).then(() => dir);
  }
  return building;
}
t.teardown(() => {
  if (outdir) rmSync(outdir, { recursive: true, force: true });
});

t.test('the built service loads no driver, mail transport, media library, tracing or MCP SDK at start', async (t) => {
  const outdir = await built(t);

  const loaded = packagesLoadedAtStart(outdir, 'main.mjs');
  // What every process needs is found, so an empty reading cannot pass for a lean one.
  t.ok(loaded.has('fastify') && loaded.has('zod'), `fastify and zod are loaded at start (found: ${[...loaded].sort().join(', ')})`);
  for (const name of IMPORTED_ON_USE) t.notOk(loaded.has(name), `${name} is imported on use, not at start`);
});

/**
 * V8 keeps a script's source in memory for as long as the script lives, one byte a character when
 * every character is Latin-1, two otherwise. The build keeps some comments, and one arrow or
 * ellipsis in them doubled what the 1.6 MB chunk of plugins takes (3.2 MiB, measured in a heap
 * snapshot); in source code, write it as an escape (\u2026).
 */
t.test('every module the build emits is Latin-1, so V8 keeps its source one byte a character', async (t) => {
  const outdir = await built(t);
  const modules = readdirSync(outdir).filter((file) => file.endsWith('.mjs'));
  t.ok(modules.length > 5, `${modules.length} modules emitted`);
  for (const file of modules) {
    const lines = readFileSync(join(outdir, file), 'utf8').split('\n');
    const wide = lines.flatMap((line, index) => ([...line].some((char) => char.codePointAt(0)! > 0xff) ? [`${index + 1}: ${line.trim().slice(0, 100)}`] : []));
    t.same(wide, [], `${file}: lines with a character past U+00FF`);
  }
});
