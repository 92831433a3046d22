import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { requestOperations } from './request-operations.ts';
import { usageOperations, type UsageDeps } from './usage-operations.ts';
import { UsageStore } from './usage-store.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './usage-errors.ts';

export const usagePlugin = definePlugin({
  name: 'usage',
  description: 'Read side of metering: usage report, series, comparison, and the gateway request log',
  // Reads the columns and tables metering's migration adds (price_version, request_log_bodies).
  dependsOn: ['metering'],
  operations: ({ container }) => {
    const deps: UsageDeps = {
      store: new UsageStore(container.resolve(Tokens.Database)),
      identity: container.resolve(Tokens.Identity),
      clock: container.resolve(Tokens.Clock),
    };
    return [...usageOperations(deps), ...requestOperations(deps)];
  },
});
