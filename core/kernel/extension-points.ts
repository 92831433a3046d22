import { ConfigError } from '../../config/load.ts';

/**
 * A typed seam where one plugin supplies what others use: the admission in front of every /v1
 * call, where budget alerts go, where payments come from. The point is declared once, next to its
 * interface; a plugin provides it in register(); consumers read it once, from operations(),
 * routes(), subscribers() or start() on, when every plugin has registered, so what a consumer
 * holds never changes under it. At most one plugin provides a point: two are refused at start,
 * naming both.
 *
 * `R` is what reading gives: `T` when the point has a default, `T | undefined` when it has none
 * (the consumer then says what happens without one).
 */
export interface ExtensionPoint<T, R extends T | undefined = T | undefined> {
  readonly name: string;
  /** Read when no plugin provides the point. */
  readonly default: R;
  /** Phantom field: only the type system reads it. */
  readonly __type?: T;
}

export function defineExtensionPoint<T>(name: string, options: { default: T }): ExtensionPoint<T, T>;
export function defineExtensionPoint<T>(name: string, options?: { default?: undefined }): ExtensionPoint<T, T | undefined>;
export function defineExtensionPoint<T>(name: string, options: { default?: T } = {}): ExtensionPoint<T, T | undefined> {
  return { name, default: options.default };
}

/**
 * A seam that many plugins add to (the input guards in front of every /v1 call): each contributes
 * items in register(); consumers read them all, in plugin order, as one frozen list.
 */
export interface ContributionPoint<T> {
  readonly name: string;
  /** Phantom field: only the type system reads it. */
  readonly __item?: T;
}

export function defineContributionPoint<T>(name: string): ContributionPoint<T> {
  return { name };
}

/** What a plugin's context offers (`ctx.extensions`). */
export interface PluginExtensions {
  /** In register() only. */
  provide<T>(point: ExtensionPoint<T, T | undefined>, implementation: NoInfer<T>): void;
  /** From operations()/routes()/subscribers()/start() on, never in register(). */
  get<T, R extends T | undefined>(point: ExtensionPoint<T, R>): R;
  /** In register() only: adds one item to a contribution point. */
  contribute<T>(point: ContributionPoint<T>, item: NoInfer<T>): void;
  /** From operations()/routes()/subscribers()/start() on: every item contributed, in plugin order. */
  all<T>(point: ContributionPoint<T>): readonly T[];
}

/** The kernel's side: one per app, handing each plugin a view that knows the plugin's name. */
export class ExtensionRegistry {
  private readonly provided = new Map<ExtensionPoint<unknown>, { plugin: string; implementation: unknown }>();
  private readonly contributed = new Map<ContributionPoint<unknown>, unknown[]>();
  private registering = true;

  forPlugin(plugin: string): PluginExtensions {
    return {
      provide: (point, implementation) => {
        if (!this.registering) throw new Error(`plugin ${plugin} provides extension point ${point.name} after register(): points are provided before any is read`);
        const earlier = this.provided.get(point);
        if (earlier) {
          throw new ConfigError(`config: plugins.${plugin}: provides extension point ${point.name}, which plugin ${earlier.plugin} provides already; enable only one of them`);
        }
        this.provided.set(point, { plugin, implementation });
      },
      get: <T, R extends T | undefined>(point: ExtensionPoint<T, R>): R => {
        if (this.registering)
          throw new Error(`plugin ${plugin} reads extension point ${point.name} in register(): read it from operations(), routes() or start(), once every plugin has provided its own`);
        const provided = this.provided.get(point);
        return provided ? (provided.implementation as R) : point.default;
      },
      contribute: (point, item) => {
        if (!this.registering) throw new Error(`plugin ${plugin} contributes to ${point.name} after register(): items are added before any is read`);
        const items = this.contributed.get(point) ?? [];
        items.push(item);
        this.contributed.set(point, items);
      },
      all: <T>(point: ContributionPoint<T>): readonly T[] => {
        if (this.registering) throw new Error(`plugin ${plugin} reads contribution point ${point.name} in register(): read it from operations(), routes() or start()`);
        return Object.freeze([...((this.contributed.get(point) as T[] | undefined) ?? [])]);
      },
    };
  }

  /** Every plugin has registered: from here points are read, and no longer provided. */
  closeRegistration(): void {
    this.registering = false;
  }
}
