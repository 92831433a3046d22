import type { ProviderContext, UpstreamTimeouts } from '../core/gateway/provider.ts';
import { createOutboundUrlChecker } from '../core/net/outbound-url-guard.ts';

/**
 * Generous on purpose: a non-streamed answer from a reasoning model sends its headers only when
 * it is done, so "first byte" can be minutes. Operators tighten these per deployment.
 */
export const DEFAULT_UPSTREAM_TIMEOUTS: UpstreamTimeouts = { connectMs: 10_000, firstByteMs: 180_000, totalMs: 600_000 };

/**
 * The context the kernel hands to ProviderType.create. `checkOutboundUrl` refuses literal private
 * addresses and localhost names; providers skip it (and the connect-time guard) when their own
 * config says `allowPrivateNetwork: true`.
 */
export function createProviderContext(options: { timeouts?: Partial<UpstreamTimeouts>; allowPrivateNetwork?: boolean } = {}): ProviderContext {
  return {
    timeouts: { ...DEFAULT_UPSTREAM_TIMEOUTS, ...options.timeouts },
    checkOutboundUrl: createOutboundUrlChecker({ allowPrivate: options.allowPrivateNetwork ?? false }),
  };
}
