import { z } from 'zod';
import { appsProxyConfigSchema } from './proxy/index.ts';

const MiB = 1024 * 1024;

/** `plugins.apps`: the proxy apps answer on, how apps run, and how deploys build them. */
export const appsConfigSchema = z.strictObject({
  proxy: appsProxyConfigSchema.prefault({}),
  runtime: z
    .strictObject({
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
    .prefault({}),
  build: z
    .strictObject({
      /** Default `<storage.dataDir>/apps`: work dirs under `builds/`, artifacts under `artifacts/`. */
      dir: z.string().min(1).optional(),
      /** The longest install plus build may take (`build_timeout`). */
      timeoutMs: z.number().int().min(1_000).default(900_000),
      /** Address-space cap of the install and build commands (`build_memory`). */
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
});

export type AppsConfig = z.output<typeof appsConfigSchema>;
