import { ConfigError, describeIssue } from '../../config/load.ts';
import type { AnyPlugin } from './plugin.ts';

export interface ResolvedPlugin {
  plugin: AnyPlugin;
  config: unknown;
}

/**
 * Picks the enabled plugins out of the manifest, validates their config sections, and orders them
 * so every plugin comes after what it depends on (manifest order otherwise). Any mistake is a
 * ConfigError naming the field: boot stops before anything starts.
 */
export function resolvePlugins(manifest: readonly AnyPlugin[], enabled: Record<string, unknown>): ResolvedPlugin[] {
  const byName = new Map(manifest.map((p) => [p.name, p]));
  for (const name of Object.keys(enabled)) {
    if (!byName.has(name)) {
      const known = manifest.map((p) => p.name).join(', ');
      throw new ConfigError(`config: plugins.${name}: unknown plugin (known plugins: ${known})`);
    }
  }
  const chosen = manifest.filter((p) => Object.hasOwn(enabled, p.name) && enabled[p.name] !== false);
  const chosenNames = new Set(chosen.map((p) => p.name));
  for (const plugin of chosen) {
    for (const dependency of plugin.dependsOn ?? []) {
      if (!chosenNames.has(dependency)) {
        throw new ConfigError(`config: plugins.${plugin.name}: requires plugin '${dependency}', which is not enabled`);
      }
    }
  }

  const ordered: AnyPlugin[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (plugin: AnyPlugin, trail: string[]) => {
    const seen = state.get(plugin.name);
    if (seen === 'done') return;
    if (seen === 'visiting') {
      throw new ConfigError(`config: plugins.${plugin.name}: dependency cycle ${[...trail, plugin.name].join(' -> ')}`);
    }
    state.set(plugin.name, 'visiting');
    for (const dependency of plugin.dependsOn ?? []) visit(byName.get(dependency)!, [...trail, plugin.name]);
    state.set(plugin.name, 'done');
    ordered.push(plugin);
  };
  for (const plugin of chosen) visit(plugin, []);

  return ordered.map((plugin) => {
    const section = enabled[plugin.name];
    const raw = section === true || section === null || section === undefined ? {} : section;
    if (!plugin.configSchema) {
      if (typeof raw !== 'object' || Object.keys(raw).length > 0) {
        throw new ConfigError(`config: plugins.${plugin.name}: this plugin takes no settings`);
      }
      return { plugin, config: {} };
    }
    const parsed = plugin.configSchema.safeParse(raw);
    if (!parsed.success) throw new ConfigError(describeIssue(parsed.error.issues[0], ['plugins', plugin.name]));
    return { plugin, config: parsed.data };
  });
}
