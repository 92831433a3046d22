import { z } from 'zod';

/**
 * The proxy's settings, `plugins.apps.proxy` (the apps plugin nests this schema under its own).
 * `port: 0` asks the system for a free port (tests).
 */
export const appsProxyConfigSchema = z.strictObject({
  host: z.string().min(1).default('127.0.0.1'),
  port: z.number().int().min(0).max(65_535).default(8081),
  /** Apps answer at `<slug>.<baseDomain>`: `http://hello.localhost:8081` by default. */
  baseDomain: z
    .string()
    .regex(/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i, 'a host name such as apps.example.com')
    .default('localhost'),
  /** A full reload of the routes from the database this often: repairs a change a replica missed while its pub/sub was away. */
  reloadEveryMs: z.number().int().min(1_000).default(30_000),
  /**
   * After a target refused or reset an idempotent request without a byte sent to the client, how
   * long the proxy waits for that app's route to change (the switch of a deploy) before it retries
   * on whatever the route then names.
   */
  swapWaitMs: z.number().int().min(0).max(30_000).default(2_000),
  /** `retry-after` of the 503 a stopped app answers with. */
  stoppedRetryAfterSeconds: z.number().int().min(1).default(5),
  /**
   * Keep a client's `X-Forwarded-For` and append to it: only behind a proxy of the operator's own
   * (a CDN, a load balancer) that sets it. Off, the proxy is the edge and names the peer alone.
   */
  trustForwarded: z.boolean().default(false),
  rows: z
    .strictObject({
      flushIntervalMs: z.number().int().min(10).default(250),
      batchSize: z.number().int().min(1).default(500),
      maxQueue: z.number().int().min(100).default(50_000),
    })
    .prefault({}),
});

export type AppsProxyConfig = z.output<typeof appsProxyConfigSchema>;
