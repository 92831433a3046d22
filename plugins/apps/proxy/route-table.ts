import type { PubSub, Unsubscribe } from '../../../core/ports/coordination.ts';

/** Where the proxy sends one app's traffic: its web service and the instance serving it now. */
export interface AppRoute {
  /** The host label: `<slug>.<baseDomain>`. Lower case. */
  slug: string;
  organizationId: string;
  appId: string;
  serviceId: string;
  /** The deployment the target runs; null before the first one is live. */
  deploymentId: string | null;
  /** `127.0.0.1:PORT` of the running instance; null while the service is stopped (the proxy answers 503). */
  target: string | null;
  /**
   * Grows with every change of this slug's route (e.g. the switch's time in ms, or a row version):
   * an update older than the one held is ignored, so messages that cross on the way (two replicas
   * publishing, a full reload racing an update) never bring an old target back.
   */
  revision: number;
}

/** The full set of routes, read from the durable store (the apps plugin backs it with its table). */
export interface RouteSource {
  loadRoutes(): Promise<readonly AppRoute[]>;
}

/** One channel for every replica: each message is one slug's new route, or its removal. */
export const ROUTES_CHANNEL = 'apps:routes';

type RouteMessage = { route: AppRoute } | { removed: string; revision: number };

/** Announces a route to every replica's proxy (this one's included: it hears its own message). */
export function publishRoute(pubsub: PubSub, route: AppRoute): Promise<void> {
  return pubsub.publish(ROUTES_CHANNEL, JSON.stringify({ route: { ...route, slug: route.slug.toLowerCase() } } satisfies RouteMessage));
}

/** Announces that a slug no longer names an app (deleted, renamed): its host answers 404 everywhere. */
export function publishRouteRemoval(pubsub: PubSub, slug: string, revision: number): Promise<void> {
  return pubsub.publish(ROUTES_CHANNEL, JSON.stringify({ removed: slug.toLowerCase(), revision } satisfies RouteMessage));
}

/**
 * The proxy's routes, in memory: `slug → route`. Looking a host up never touches the database, so
 * the proxy serves while the database is down. Updates arrive over the coordination pub/sub (every
 * replica hears every change); a full reload from the RouteSource runs at start and every
 * `reloadEveryMs` after, which repairs whatever a replica missed while its pub/sub connection was
 * away (the port tells no one of a reconnect, so the period bounds how long a missed change lasts).
 * A reload that fails (database away) keeps the routes held.
 */
export class RouteTable {
  private readonly routes = new Map<string, AppRoute>();
  /** Revisions of removed slugs, so a late update of a removed app does not bring it back. Cleared by a full reload. */
  private readonly removed = new Map<string, number>();
  /** Slugs changed by a message while a reload was reading: the reload must not overwrite them with what it read. */
  private touchedDuringReload: Set<string> | null = null;
  private readonly waiters = new Map<string, Set<() => void>>();
  private unsubscribe: Unsubscribe | null = null;
  private timer: NodeJS.Timeout | null = null;
  private reloading: Promise<void> | null = null;

  constructor(
    private readonly deps: {
      pubsub: PubSub;
      source: RouteSource;
      reloadEveryMs: number;
      onReloadError: (error: unknown) => void;
    },
  ) {}

  /** Subscribes first, then reads the full set, so no change falls between the two. */
  async start(): Promise<void> {
    this.unsubscribe = await this.deps.pubsub.subscribe(ROUTES_CHANNEL, (message) => this.receive(message));
    await this.reload().catch((error: unknown) => this.deps.onReloadError(error));
    this.timer = setInterval(() => void this.reload().catch((error: unknown) => this.deps.onReloadError(error)), this.deps.reloadEveryMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const unsubscribe = this.unsubscribe;
    this.unsubscribe = null;
    // An unreachable Redis refusing the UNSUBSCRIBE must not stop the rest of the shutdown.
    await unsubscribe?.().catch(() => undefined);
    await this.reloading?.catch(() => undefined);
    for (const slug of [...this.waiters.keys()]) this.wake(slug);
  }

  get(slug: string): AppRoute | undefined {
    return this.routes.get(slug);
  }

  /** Every route held (for tests and diagnostics). */
  all(): AppRoute[] {
    return [...this.routes.values()];
  }

  /** Targets some route points at now: a connection pool to any other may be closed. */
  liveTargets(): Set<string> {
    const targets = new Set<string>();
    for (const route of this.routes.values()) if (route.target) targets.add(route.target);
    return targets;
  }

  /** Resolves when this slug's route next changes, or after `withinMs`, whichever is first. */
  nextChange(slug: string, withinMs: number): Promise<void> {
    return new Promise((resolve) => {
      let waiters = this.waiters.get(slug);
      if (!waiters) this.waiters.set(slug, (waiters = new Set()));
      const set = waiters;
      const table = this.waiters;
      const timer = setTimeout(done, withinMs);
      function done(): void {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && table.get(slug) === set) table.delete(slug);
        resolve();
      }
      set.add(done);
    });
  }

  /** Reads the whole table from the source; concurrent callers share one read. */
  reload(): Promise<void> {
    this.reloading ??= this.readAll().finally(() => {
      this.reloading = null;
      this.touchedDuringReload = null;
    });
    return this.reloading;
  }

  /** Applies one change as a message would (the publishing replica may also call this to act before its echo). */
  apply(route: AppRoute): void {
    const held = this.routes.get(route.slug);
    if (held && held.revision > route.revision) return;
    const removedAt = this.removed.get(route.slug);
    if (removedAt !== undefined && removedAt >= route.revision) return;
    this.removed.delete(route.slug);
    this.routes.set(route.slug, route);
    this.touchedDuringReload?.add(route.slug);
    this.wake(route.slug);
  }

  remove(slug: string, revision: number): void {
    const held = this.routes.get(slug);
    if (held && held.revision > revision) return;
    this.routes.delete(slug);
    this.removed.set(slug, Math.max(revision, this.removed.get(slug) ?? revision));
    this.touchedDuringReload?.add(slug);
    this.wake(slug);
  }

  private async readAll(): Promise<void> {
    this.touchedDuringReload = new Set();
    const loaded = await this.deps.source.loadRoutes();
    const touched = this.touchedDuringReload;
    const fresh = new Map(loaded.map((route) => [route.slug.toLowerCase(), { ...route, slug: route.slug.toLowerCase() }]));
    for (const slug of [...this.routes.keys()]) {
      if (!fresh.has(slug) && !touched.has(slug)) {
        this.routes.delete(slug);
        this.wake(slug);
      }
    }
    this.removed.clear();
    for (const route of fresh.values()) {
      if (touched.has(route.slug)) continue;
      const held = this.routes.get(route.slug);
      if (held && held.revision > route.revision) continue;
      if (held && held.target === route.target && held.deploymentId === route.deploymentId && held.revision === route.revision) continue;
      this.routes.set(route.slug, route);
      this.wake(route.slug);
    }
  }

  private receive(message: string): void {
    let parsed: RouteMessage;
    try {
      parsed = JSON.parse(message) as RouteMessage;
    } catch {
      return;
    }
    if ('route' in parsed && typeof parsed.route?.slug === 'string') this.apply(parsed.route);
    else if ('removed' in parsed && typeof parsed.removed === 'string') this.remove(parsed.removed, Number(parsed.revision) || 0);
  }

  private wake(slug: string): void {
    const waiters = this.waiters.get(slug);
    if (!waiters) return;
    this.waiters.delete(slug);
    for (const done of waiters) done();
  }
}
