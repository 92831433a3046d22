import type { AppConfig } from '../config/schema.ts';
import type { Container } from '../core/kernel/container.ts';
import type { AnyPlugin } from '../core/kernel/plugin.ts';
import { buildApp } from './build-app.ts';

/**
 * The whole service, built for one operator act from the CLI, that neither listens nor runs jobs
 * (role `api`, never readied): the same plugins, migrations and services a replica has, so the act
 * goes through the code the API uses, and the domain events it emits are queued for the
 * subscribers that the running service's workers run. Close it when done.
 */
export async function openOperatorService(config: AppConfig, manifest: readonly AnyPlugin[]): Promise<{ container: Container; close(): Promise<void> }> {
  const app = await buildApp({ ...config, server: { ...config.server, role: 'api', logLevel: 'error' } }, { manifest });
  return { container: app.svc.container, close: () => app.close() };
}
