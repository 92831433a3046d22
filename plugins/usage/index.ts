import { definePlugin } from '../../core/kernel/plugin.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { RequestLogReaderPoint } from '../../core/ports/metering.ts';
import { requestOperations } from './request-operations.ts';
import { usageOperations, type UsageDeps } from './usage-operations.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './usage-errors.ts';

export const usagePlugin = definePlugin({
  name: 'usage',
  description: 'Read side of metering: usage report, series, comparison, and the gateway request log',
  // Reads the request log, which metering writes and provides a reader for.
  dependsOn: ['metering'],
  operations: ({ container, extensions }) => {
    const store = extensions.get(RequestLogReaderPoint);
    if (!store) throw new Error('usage: no request-log reader; the metering plugin provides it');
    const deps: UsageDeps = {
      store,
      identity: container.resolve(Tokens.Identity),
      clock: container.resolve(Tokens.Clock),
    };
    return [...usageOperations(deps), ...requestOperations(deps)];
  },
});
