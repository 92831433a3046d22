import { ConfigError, describeIssue } from '../../config/load.ts';
import type { Provider, ProviderType } from '../../core/gateway/provider.ts';
import type { DeprecationLog } from '../../providers/legacy-provider-shape.ts';
import { createProviderContext, resolveProviderType } from '../../providers/index.ts';
import type { InferenceConfig } from './inference-config.ts';

/**
 * The provider instances named in config. Built in start(): a provider may come from an npm
 * package, and loading one is asynchronous.
 */
export class ProviderRegistry {
  private readonly providers = new Map<string, Provider>();

  async load(config: InferenceConfig, log?: DeprecationLog): Promise<void> {
    for (const [name, entry] of Object.entries(config.providers)) {
      const { type, package: packageName, timeouts, ...typeConfig } = entry;
      const field = `plugins.inference.providers.${name}`;
      let providerType: ProviderType;
      try {
        providerType = await resolveProviderType({ type, package: packageName }, log);
      } catch (error) {
        throw new ConfigError(`config: ${field}: ${(error as Error).message}`);
      }
      const parsed = providerType.configSchema.safeParse(typeConfig);
      if (!parsed.success) {
        // A package may bring its own schema library: use zod's issue when there is one.
        const issue = (parsed.error as { issues?: Parameters<typeof describeIssue>[0][] } | undefined)?.issues?.[0];
        throw new ConfigError(
          issue ? describeIssue(issue, ['plugins', 'inference', 'providers', name]) : `config: ${field}: ${String((parsed.error as Error | undefined)?.message ?? 'invalid')}`,
        );
      }
      const allowPrivateNetwork = (parsed.data as { allowPrivateNetwork?: boolean } | null)?.allowPrivateNetwork === true;
      const context = createProviderContext({ timeouts: { ...config.timeouts, ...timeouts }, allowPrivateNetwork });
      this.providers.set(name, providerType.create(name, parsed.data, context));
    }
  }

  get(name: string): Provider | undefined {
    return this.providers.get(name);
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.providers.values()].map((provider) => provider.close?.()));
    this.providers.clear();
  }
}
