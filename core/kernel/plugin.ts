import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { z } from 'zod';
import type { Container } from './container.ts';
import type { PluginExtensions } from './extension-points.ts';
import type { Migration } from '../ports/database.ts';
import type { AnyOperation } from '../operations/operations.ts';
import type { AnySubscriber } from '../events/domain-events.ts';
import type { PeriodicDefinition, QueueDefinition } from '../jobs/queue-definitions.ts';
import type { AppConfig } from '../../config/schema.ts';

/**
 * A plugin is one capability of the service (keys, inference, usage, …). Operators enable plugins
 * by name in config; the kernel checks dependencies, validates each plugin's own config section,
 * runs migrations, then calls the hooks below in dependency order (stop in reverse order). Job
 * workers start after every plugin's start and are drained before any plugin's stop.
 */
export interface PluginContext<C> {
  readonly config: C;
  readonly appConfig: AppConfig;
  readonly container: Container;
  /** Typed seams between plugins (core/kernel/extension-points.ts): provide in register(), read later. */
  readonly extensions: PluginExtensions;
  readonly logger: FastifyBaseLogger;
}

export interface PluginDefinition<C = unknown> {
  readonly name: string;
  readonly description: string;
  /** Plugins that must be enabled, and are set up before this one. */
  readonly dependsOn?: readonly string[];
  /** Validates `plugins.<name>` from config; absent means the plugin takes no settings. */
  readonly configSchema?: z.ZodType<C>;
  readonly migrations?: readonly Migration[];
  /** Binds this plugin's services in the container and provides its extension points. Synchronous: no I/O at bind time. */
  register?(ctx: PluginContext<C>): void;
  /** Management operations: mounted under /client and /platform/v1, documented, offered as MCP tools. */
  operations?(ctx: PluginContext<C>): readonly AnyOperation[];
  /** Durable job queues this plugin handles: `spec.handle(run)` of each `defineQueue` (core/jobs). */
  queues?(ctx: PluginContext<C>): readonly QueueDefinition[];
  /** Jobs run every interval by exactly one replica (`definePeriodic`). */
  periodic?(ctx: PluginContext<C>): readonly PeriodicDefinition[];
  /** Handlers of domain events (`defineSubscriber`), each run once per event of the types it lists. */
  subscribers?(ctx: PluginContext<C>): readonly AnySubscriber[];
  /** Raw routes (e.g. the /v1 gateway), inside an encapsulated Fastify context. */
  routes?(app: FastifyInstance, ctx: PluginContext<C>): Promise<void> | void;
  /** Background work (workers, schedulers, subscriptions). */
  start?(ctx: PluginContext<C>): Promise<void>;
  stop?(ctx: PluginContext<C>): Promise<void>;
}

export function definePlugin<S extends z.ZodType>(definition: Omit<PluginDefinition<z.output<S>>, 'configSchema'> & { configSchema: S }): PluginDefinition<z.output<S>>;
export function definePlugin(definition: Omit<PluginDefinition<Record<string, never>>, 'configSchema'>): PluginDefinition<Record<string, never>>;
export function definePlugin(definition: PluginDefinition<unknown>): PluginDefinition<unknown> {
  return definition;
}

// Plugins are stored heterogeneously; their config type is checked inside definePlugin.
// biome-ignore lint/suspicious/noExplicitAny: the element type varies per entry
export type AnyPlugin = PluginDefinition<any>;
