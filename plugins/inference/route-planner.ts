import { offers, type Modality, type ModalityProviders, type Provider } from '../../core/gateway/provider.ts';
import type { CircuitBreaker } from './circuit-breaker.ts';
import type { CatalogueModel } from './model-catalogue.ts';
import type { ProviderRegistry } from './provider-registry.ts';

/** One upstream route able to serve a call of modality M. */
export interface RouteCandidate<M extends Modality = Modality> {
  /** `provider/model`, the circuit breaker's key and what logs show. */
  key: string;
  provider: Provider;
  /** The provider's interface for M: what the call is made on. */
  api: ModalityProviders[M];
  upstreamModel: string;
}

// The tier cache holds candidates of every modality; plan<M> hands them back typed for the modality asked.
// biome-ignore lint/suspicious/noExplicitAny: see above
type CandidateOfAnyModality = RouteCandidate<any>;

interface WeightedCandidate {
  candidate: CandidateOfAnyModality;
  weight: number;
}

/**
 * A model's usable routes for one modality, grouped into priority tiers, worked out once per
 * model, modality and provider registry (the registry is fixed once the plugin has started)
 * instead of on every request.
 */
const tierCache = new WeakMap<CatalogueModel, Map<Modality, { providers: ProviderRegistry; tiers: WeightedCandidate[][] }>>();

function tiersOf(model: CatalogueModel, modality: Modality, providers: ProviderRegistry): WeightedCandidate[][] {
  let byModality = tierCache.get(model);
  if (!byModality) tierCache.set(model, (byModality = new Map()));
  const cached = byModality.get(modality);
  if (cached && cached.providers === providers) return cached.tiers;
  const byPriority = new Map<number, WeightedCandidate[]>();
  model.routes.forEach((route, index) => {
    const provider = providers.get(route.provider);
    if (!provider || !offers(provider, modality)) return;
    const priority = route.priority ?? index;
    const tier = byPriority.get(priority) ?? [];
    tier.push({ candidate: { key: `${route.provider}/${route.model}`, provider, api: provider[modality], upstreamModel: route.model }, weight: route.weight });
    byPriority.set(priority, tier);
  });
  const tiers = [...byPriority.keys()].sort((a, b) => a - b).map((priority) => byPriority.get(priority)!);
  byModality.set(modality, { providers, tiers });
  return tiers;
}

/**
 * Orders a model's routes for one request of a modality: by priority (config order when none is
 * given), routes of equal priority in a weighted random order, routes whose circuit is open moved
 * to the back (still tried if nothing else works), and routes whose provider does not offer the
 * modality dropped (read from the provider's members, see `offers`). Every /v1 route asks here.
 */
export function planRoutes<M extends Modality>(
  model: CatalogueModel,
  modality: M,
  providers: ProviderRegistry,
  breaker: CircuitBreaker,
  random: () => number = Math.random,
): RouteCandidate<M>[] {
  const tiers = tiersOf(model, modality, providers);
  // One route: nothing to order (an open circuit would still be tried, being the only one).
  if (tiers.length === 1 && tiers[0]!.length === 1) return [tiers[0]![0]!.candidate];
  const healthy: RouteCandidate<M>[] = [];
  const cooling: RouteCandidate<M>[] = [];
  for (const tier of tiers) {
    for (const candidate of weightedOrder(tier, random)) (breaker.isOpen(candidate.key) ? cooling : healthy).push(candidate);
  }
  return healthy.concat(cooling);
}

/** Weighted sampling without replacement. */
function weightedOrder(items: WeightedCandidate[], random: () => number): CandidateOfAnyModality[] {
  if (items.length === 1) return [items[0]!.candidate];
  const pool = [...items];
  const out: CandidateOfAnyModality[] = [];
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
