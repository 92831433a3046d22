import type { Capability, Provider } from '../../core/provider.ts';
import type { CircuitBreaker } from './circuit-breaker.ts';
import type { CatalogueModel } from './model-catalogue.ts';
import type { ProviderRegistry } from './provider-registry.ts';

export interface RouteCandidate {
  /** `provider/model`, the circuit breaker's key and what logs show. */
  key: string;
  provider: Provider;
  upstreamModel: string;
}

interface WeightedCandidate {
  candidate: RouteCandidate;
  weight: number;
}

/**
 * A model's usable routes for one capability, grouped into priority tiers, worked out once per
 * model, capability and provider registry (the registry is fixed once the plugin has started)
 * instead of on every request.
 */
const tierCache = new WeakMap<CatalogueModel, Map<Capability, { providers: ProviderRegistry; tiers: WeightedCandidate[][] }>>();

function tiersOf(model: CatalogueModel, capability: Capability, providers: ProviderRegistry): WeightedCandidate[][] {
  let byCapability = tierCache.get(model);
  if (!byCapability) tierCache.set(model, (byCapability = new Map()));
  const cached = byCapability.get(capability);
  if (cached && cached.providers === providers) return cached.tiers;
  const byPriority = new Map<number, WeightedCandidate[]>();
  model.routes.forEach((route, index) => {
    const provider = providers.get(route.provider);
    if (!provider || !provider.capabilities.has(capability)) return;
    const priority = route.priority ?? index;
    const tier = byPriority.get(priority) ?? [];
    tier.push({ candidate: { key: `${route.provider}/${route.model}`, provider, upstreamModel: route.model }, weight: route.weight });
    byPriority.set(priority, tier);
  });
  const tiers = [...byPriority.keys()].sort((a, b) => a - b).map((priority) => byPriority.get(priority)!);
  byCapability.set(capability, { providers, tiers });
  return tiers;
}

/**
 * Orders a model's routes for one request: by priority (config order when none is given), routes
 * of equal priority in a weighted random order, routes whose circuit is open moved to the back
 * (still tried if nothing else works), and routes whose provider lacks the capability dropped.
 */
export function planRoutes(
  model: CatalogueModel,
  capability: Capability,
  providers: ProviderRegistry,
  breaker: CircuitBreaker,
  random: () => number = Math.random,
): RouteCandidate[] {
  const tiers = tiersOf(model, capability, providers);
  // One route: nothing to order (an open circuit would still be tried, being the only one).
  if (tiers.length === 1 && tiers[0]!.length === 1) return [tiers[0]![0]!.candidate];
  const healthy: RouteCandidate[] = [];
  const cooling: RouteCandidate[] = [];
  for (const tier of tiers) {
    for (const candidate of weightedOrder(tier, random)) (breaker.isOpen(candidate.key) ? cooling : healthy).push(candidate);
  }
  return healthy.concat(cooling);
}

/** Weighted sampling without replacement. */
function weightedOrder(items: WeightedCandidate[], random: () => number): RouteCandidate[] {
  if (items.length === 1) return [items[0]!.candidate];
  const pool = [...items];
  const out: RouteCandidate[] = [];
  while (pool.length > 0) {
    const total = pool.reduce((sum, item) => sum + item.weight, 0);
    let pick = random() * total;
    let index = 0;
    while (index < pool.length - 1 && pick >= pool[index]!.weight) {
      pick -= pool[index]!.weight;
      index += 1;
    }
    out.push(pool[index]!.candidate);
    pool.splice(index, 1);
  }
  return out;
}
