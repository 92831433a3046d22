import { z } from 'zod';
import { usdAmount } from '../../core/vocabulary/money.ts';
import { hostingPricesSchema } from './hosting-prices.ts';
import { appsProxyConfigSchema } from './proxy/index.ts';
import { upkeepConfigShape } from './upkeep/upkeep-config.ts';

const MiB = 1024 * 1024;

/** `apps.runtime.kubernetes`: the cluster apps run on when `provider` is `kubernetes` (runtime/README.md). */
export const kubernetesRuntimeConfigSchema = z.strictObject({
  kubeconfig: z.string().min(1).describe('Path of a kubeconfig file; its current context is used'),
  namespace: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/)
    .default('default')
    .describe('The namespace the Deployments, Services, Secrets and Jobs are written in'),
  baseImage: z.string().min(1).describe('The image apps run in (their interpreters), e.g. node:20-bookworm-slim'),
  fetchImage: z.string().min(1).default('busybox:1.36').describe('The init container image fetching the artifact (sh, wget, tar)'),
  containerPort: z.number().int().min(1).max(65_535).default(8080).describe('PORT inside the pod and the Service port'),
  clusterDomain: z.string().min(1).default('cluster.local').describe('The cluster DNS domain of the proxy targets'),
  artifactUrlBase: z.url().optional().describe('This service as the cluster reaches it, for the signed artifact URLs (default server.publicUrl)'),
  artifactUrlTtlMs: z
    .number()
    .int()
    .min(60_000)
    .default(6 * 3600_000)
    .describe('How long a signed artifact URL is valid'),
  rolloutTimeoutMs: z.number().int().min(1_000).default(120_000).describe('How long a rollout may take to become available'),
  pollMs: z.number().int().min(10).default(1_000).describe('Between reads of a rollout or a one-off'),
});

/** `plugins.apps`: the proxy apps answer on, how apps run, and how deploys build them. */
export const appsConfigSchema = z.strictObject({
  proxy: appsProxyConfigSchema.prefault({}),
  runtime: z
    .strictObject({
      /** `local`: sandboxed processes on this machine; `kubernetes`: a Deployment per service on a cluster. */
      provider: z.enum(['local', 'kubernetes']).default('local'),
      kubernetes: kubernetesRuntimeConfigSchema.optional(),
      /** Default `<storage.dataDir>/apps/runtime`: the runtime's state file and the apps' logs. */
      stateDir: z.string().min(1).optional(),
      /** PORTs handed to apps on 127.0.0.1. */
      ports: z.strictObject({ first: z.number().int().min(1024).max(65_535), last: z.number().int().min(1024).max(65_535) }).prefault({ first: 20_000, last: 20_999 }),
      /** Refuse to run apps without bwrap instead of warning. */
      requireSandbox: z.boolean().default(false),
      bwrapPath: z.string().min(1).default('/usr/bin/bwrap'),
      healthTimeoutMs: z.number().int().min(100).default(30_000),
      stopGraceMs: z.number().int().min(0).default(10_000),
      limits: z
        .strictObject({
          memoryBytes: z
            .number()
            .int()
            .min(64 * MiB)
            .optional(),
          processes: z.number().int().min(8).optional(),
          openFiles: z.number().int().min(64).optional(),
          cpuSeconds: z.number().int().min(1).optional(),
        })
        .prefault({}),
    })
    .refine((runtime) => runtime.provider !== 'kubernetes' || runtime.kubernetes !== undefined, {
      message: 'apps.runtime.provider kubernetes needs apps.runtime.kubernetes (kubeconfig, baseImage)',
      path: ['kubernetes'],
    })
    .prefault({}),
  build: z
    .strictObject({
      /** Default `<storage.dataDir>/apps`: work dirs under `builds/`, artifacts under `artifacts/`. */
      dir: z.string().min(1).optional(),
      /** The longest install plus build may take (`build_timeout`). */
      timeoutMs: z.number().int().min(1_000).default(900_000),
      /** Memory cap (RLIMIT_DATA) of the install and build commands (`build_memory`). */
      memoryBytes: z
        .number()
        .int()
        .min(256 * MiB)
        .default(4096 * MiB),
      /** Deploys this process builds at once (the `apps.build` queue's per-worker concurrency). */
      concurrency: z.number().int().min(1).max(16).default(1),
      /**
       * What installs may reach: the registry proxy lets through these URLs' host:port and nothing
       * else (registry-proxy.ts). Default: npm's registry and PyPI's index and files.
       */
      registries: z
        .array(z.url({ protocol: /^https?$/ }))
        .max(50)
        .default(['https://registry.npmjs.org/', 'https://pypi.org/', 'https://files.pythonhosted.org/']),
      /** npm's registry inside builds (`npm_config_registry`); one of `registries`. */
      npmRegistry: z.url({ protocol: /^https?$/ }).default('https://registry.npmjs.org/'),
      /** pip's index inside builds (`PIP_INDEX_URL`); one of `registries`. */
      pypiIndex: z.url({ protocol: /^https?$/ }).default('https://pypi.org/simple/'),
      /** Processes (and threads) a build may have at once: a fork bomb fails to fork past it. */
      processes: z.number().int().min(8).default(256),
      /**
       * Run as root, a build runs as a uid of its own, `uidBase + (a hash of the deployment % 1000)`:
       * the kernel ignores the process cap for root and counts it per uid.
       */
      uidBase: z.number().int().min(1000).default(200_000),
    })
    .prefault({}),
  /** What running apps use (README.md: usage and its cost). */
  usage: z
    .strictObject({
      /** How often the runtime's instances are sampled (memory, CPU, running time). */
      sampleEveryMs: z.number().int().min(1_000).default(60_000),
      /** Samples older than this are removed (the hosting ledger closes each day well within it). */
      retentionDays: z.number().int().min(2).max(3_650).default(90),
    })
    .prefault({}),
  ...upkeepConfigShape,
  /** Hosting money (README.md: hosting money): instance time by memory tier, a daily base fee, zero balance. */
  hosting: z
    .strictObject({
      prices: hostingPricesSchema,
      /** Per organisation and UTC day with at least one instance run; 0 for none. */
      baseFeeUsdPerDay: usdAmount.default(0.01),
      /** A UTC day is charged this long after it ends: every live instance's last sighting is past its end by then. */
      closeDelayMinutes: z
        .number()
        .int()
        .min(1)
        .max(24 * 60)
        .default(15),
      /** How often the runtime's process records that its instances still run (what a crash is charged up to). */
      heartbeatSeconds: z.number().int().min(1).max(600).default(60),
      /** How often days are closed and balances checked. */
      checkEveryMinutes: z.number().int().min(1).max(60).default(5),
      /** From the warning mail (balance at zero or less) to the org's services being stopped. */
      graceHours: z
        .number()
        .min(0)
        .max(24 * 30)
        .default(72),
    })
    .refine((hosting) => hosting.closeDelayMinutes * 60 > hosting.heartbeatSeconds, {
      message: 'must be longer than heartbeatSeconds: a day is closed once every live instance was seen past its end',
      path: ['closeDelayMinutes'],
    })
    .prefault({}),
});

export type AppsConfig = z.output<typeof appsConfigSchema>;
