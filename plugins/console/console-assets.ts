import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * What a console build leaves in its directory beside the hashed assets: the one script and the
 * one stylesheet the page loads, named by their content hash so they can be cached for good.
 * Written last by the build (tools/console-bundle.ts), so a directory with a manifest is complete.
 */
export interface ConsoleManifest {
  readonly script: string;
  readonly stylesheet: string;
  /** Gzipped bytes of script + stylesheet, as the build measured them. */
  readonly gzippedBytes: number;
}

export const MANIFEST_FILE = 'manifest.json';
export const ASSETS_FOLDER = 'assets';

/** An asset's file name as the build writes it: the content hash and the kind, nothing a request could steer elsewhere. */
export const ASSET_NAME = /^[A-Za-z0-9_-]{6,64}\.(js|css)$/;

export async function readConsoleManifest(dir: string): Promise<ConsoleManifest | null> {
  let text: string;
  try {
    text = await readFile(join(dir, MANIFEST_FILE), 'utf8');
  } catch {
    return null;
  }
  const parsed = JSON.parse(text) as Partial<ConsoleManifest>;
  if (typeof parsed.script !== 'string' || typeof parsed.stylesheet !== 'string' || !ASSET_NAME.test(parsed.script) || !ASSET_NAME.test(parsed.stylesheet)) {
    throw new Error(`${join(dir, MANIFEST_FILE)} does not name a script and a stylesheet`);
  }
  return { script: parsed.script, stylesheet: parsed.stylesheet, gzippedBytes: Number(parsed.gzippedBytes ?? 0) };
}
