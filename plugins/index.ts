import type { AnyPlugin } from '../core/kernel/plugin.ts';
import { accountPlugin } from './account/index.ts';
import { appsPlugin } from './apps/index.ts';
import { auditPlugin } from './audit/index.ts';
import { batchesPlugin } from './batches/index.ts';
import { consolePlugin } from './console/index.ts';
import { filesPlugin } from './files/index.ts';
import { githostPlugin } from './githost/index.ts';
import { guardrailsPlugin } from './guardrails/index.ts';
import { inferencePlugin } from './inference/index.ts';
import { keysPlugin } from './keys/index.ts';
import { oauthPlugin } from './oauth/index.ts';
import { meteringPlugin } from './metering/index.ts';
import { usagePlugin } from './usage/index.ts';
import { projectsPlugin } from './projects/index.ts';
import { peoplePlugin } from './people/index.ts';
import { supportPlugin } from './support/index.ts';
import { toolGatewayPlugin } from './tool-gateway/index.ts';
import { webhooksPlugin } from './webhooks/index.ts';

/**
 * Every plugin the service ships, in a sensible order. Operators enable them by name under
 * `plugins:` in config; the kernel orders them by their declared dependencies.
 */
export const manifest: readonly AnyPlugin[] = [
  accountPlugin,
  projectsPlugin,
  peoplePlugin,
  keysPlugin,
  inferencePlugin,
  filesPlugin,
  guardrailsPlugin,
  meteringPlugin,
  usagePlugin,
  auditPlugin,
  oauthPlugin,
  supportPlugin,
  webhooksPlugin,
  toolGatewayPlugin,
  githostPlugin,
  appsPlugin,
  batchesPlugin,
  consolePlugin,
];
