import type { ProviderType } from '../core/gateway/provider.ts';
import { anthropicProviderType } from './anthropic/index.ts';
import { mockProviderType } from './mock/index.ts';
import { openAIProviderType } from './openai/index.ts';
import { adaptingLegacyProviders, type DeprecationLog } from './legacy-provider-shape.ts';

export { createProviderContext, DEFAULT_UPSTREAM_TIMEOUTS } from './provider-context.ts';

/** The provider types that ship with the gateway, by their `type:` name. */
// biome-ignore lint/suspicious/noExplicitAny: each provider type has its own config type
export const builtInProviderTypes: ReadonlyMap<string, ProviderType<any>> = new Map<string, ProviderType<any>>([
  [openAIProviderType.type, openAIProviderType],
  [anthropicProviderType.type, anthropicProviderType],
  [mockProviderType.type, mockProviderType],
]);

/** Types meant for development only; the kernel can warn when one serves production traffic. */
export const developmentProviderTypes: ReadonlySet<string> = new Set([mockProviderType.type]);

/** Duck-typed on purpose: a package's zod may be another copy than ours, so instanceof would lie. */
export function isProviderType(value: unknown): value is ProviderType {
  if (value === null || typeof value !== 'object') return false;
  const candidate = value as Record<string, unknown>;
  const schema = candidate['configSchema'] as Record<string, unknown> | null | undefined;
  return (
    typeof candidate['type'] === 'string' &&
    candidate['type'] !== '' &&
    typeof candidate['create'] === 'function' &&
    schema !== null &&
    typeof schema === 'object' &&
    typeof schema['parse'] === 'function' &&
    typeof schema['safeParse'] === 'function'
  );
}

function shapeProblem(value: unknown): string {
  if (value === undefined) return 'it has no default export';
  if (value === null || typeof value !== 'object') return `its default export is a ${value === null ? 'null' : typeof value}, not an object`;
  const candidate = value as Record<string, unknown>;
  const missing: string[] = [];
  if (typeof candidate['type'] !== 'string' || candidate['type'] === '') missing.push('`type` (a non-empty string)');
  if (typeof candidate['create'] !== 'function') missing.push('`create` (a function)');
  const schema = candidate['configSchema'] as Record<string, unknown> | undefined;
  if (!schema || typeof schema['parse'] !== 'function' || typeof schema['safeParse'] !== 'function') missing.push('`configSchema` (a zod schema)');
  return `its default export lacks ${missing.join(', ')}`;
}

/**
 * The provider type a provider's config names: a built-in `type`, or an npm `package` whose default
 * export is a ProviderType (loaded with import(), so it must be installed next to the gateway). A
 * package's providers in the shape before modalities are adapted, with a deprecation line in `log`.
 */
export async function resolveProviderType(typeOrPackage: { type?: string; package?: string }, log?: DeprecationLog): Promise<ProviderType> {
  const { type, package: packageName } = typeOrPackage;
  if (packageName === undefined || packageName === '') {
    if (type === undefined || type === '') throw new Error('A provider needs a `type` or a `package`');
    const builtIn = builtInProviderTypes.get(type);
    if (!builtIn) {
      throw new Error(`Unknown provider type "${type}"; built-in types are ${[...builtInProviderTypes.keys()].join(', ')} (third-party providers are named by \`package\`)`);
    }
    return builtIn;
  }

  let loaded: { default?: unknown };
  try {
    loaded = (await import(packageName)) as { default?: unknown };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new Error(`Provider package "${packageName}" could not be loaded (is it installed?): ${reason}`, { cause: error });
  }
  const exported = loaded.default;
  if (!isProviderType(exported)) {
    throw new Error(`Provider package "${packageName}" is not a provider: ${shapeProblem(exported)}`);
  }
  if (type !== undefined && type !== '' && exported.type !== type) {
    throw new Error(`Provider package "${packageName}" provides type "${exported.type}", but the config says type "${type}"`);
  }
  return adaptingLegacyProviders(exported, packageName, log);
}
