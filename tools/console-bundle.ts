import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';
import { ASSETS_FOLDER, type ConsoleManifest, MANIFEST_FILE } from '../plugins/console/console-assets.ts';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const CONSOLE_SOURCE = join(ROOT, 'console');

/**
 * Bundles console/ (TSX) into one script and one stylesheet named by content hash, then writes the
 * manifest the console plugin serves from, last, so a half-written build is never served. Types are
 * not checked here (tsc does that, against console/api/schema.d.ts): this is the fast step `npm
 * start` runs at boot when the build is missing.
 */
export async function bundleConsole(outDir: string): Promise<ConsoleManifest> {
  const assets = join(outDir, ASSETS_FOLDER);
  await rm(join(outDir, MANIFEST_FILE), { force: true });
  await rm(assets, { recursive: true, force: true });
  await mkdir(assets, { recursive: true });
  const result = await build({
    entryPoints: [join(CONSOLE_SOURCE, 'main.tsx')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['es2022'],
    jsx: 'automatic',
    jsxImportSource: 'preact',
    entryNames: '[hash]',
    outdir: assets,
    metafile: true,
    legalComments: 'none',
    logLevel: 'warning',
  });
  const outputs = Object.keys(result.metafile.outputs).map((path) => basename(path));
  const script = outputs.find((name) => name.endsWith('.js'));
  const stylesheet = outputs.find((name) => name.endsWith('.css'));
  if (!script || !stylesheet) throw new Error(`the console build wrote ${outputs.join(', ')}: expected one script and one stylesheet`);
  let gzippedBytes = 0;
  for (const name of [script, stylesheet]) gzippedBytes += gzipSync(await readFile(join(assets, name)), { level: 9 }).length;
  const manifest: ConsoleManifest = { script, stylesheet, gzippedBytes };
  await writeFile(join(outDir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
  return manifest;
}
