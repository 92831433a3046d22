import { resolve } from 'node:path';
import { z } from 'zod';
import { definePlugin } from '../../core/kernel/plugin.ts';
import { SurfacesPoint } from '../../core/kernel/surfaces.ts';
import { mountConsoleRoutes } from './console-routes.ts';

/** Where `npm run build` (and `npm start`, when missing) writes the console: beside the service's own bundle. */
export const DEFAULT_CONSOLE_DIR = 'dist/console';

const consoleConfig = z.strictObject({
  /** Off: no /console routes at all (`plugins.console: false` does the same). */
  enabled: z.boolean().default(true),
  /** The build's directory, relative to the working directory like ./data. */
  dir: z.string().min(1).default(DEFAULT_CONSOLE_DIR),
});

export type ConsoleSettings = z.output<typeof consoleConfig>;

/** The console's settings from a whole config's `plugins` section, or null when it is off. */
export function consoleSettings(plugins: Record<string, unknown>): ConsoleSettings | null {
  const section = plugins['console'];
  if (section === undefined || section === false) return null;
  const settings = consoleConfig.parse(section === true || section === null ? {} : section);
  return settings.enabled ? settings : null;
}

/**
 * The web console: a browser client of the management API served at /console/. It holds no
 * business logic and no operations of its own; see plugins/console/README.md.
 */
export const consolePlugin = definePlugin({
  name: 'console',
  description: 'The web console at /console/: a browser client of the management API',
  configSchema: consoleConfig,
  register: ({ config, extensions }) => {
    if (config.enabled) extensions.contribute(SurfacesPoint, { name: 'console', url: '/console/' });
  },
  routes(app, { config }) {
    if (config.enabled) mountConsoleRoutes(app, resolve(config.dir));
  },
});
