import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ConsoleManifest } from '../../../plugins/console/console-assets.ts';
import { bundleConsole } from '../../../tools/console-bundle.ts';
import { allPlugins, type TapLike } from '../../helpers/app.ts';

/** A fresh console build in a temporary directory (esbuild: well under a second), removed after the test. */
export async function builtConsole(t: TapLike): Promise<{ dir: string; manifest: ConsoleManifest }> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-console-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return { dir, manifest: await bundleConsole(dir) };
}

/** Every plugin with test defaults, the console serving the given build. */
export function pluginsWithConsole(dir: string): Record<string, unknown> {
  return { ...allPlugins(), console: { dir } };
}
