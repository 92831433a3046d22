import { cpSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SecretStore } from '../../../../core/ports/secrets.ts';
import { generateKeyEntry, SecretKeyring } from '../../../../core/services/secret-keys.ts';
import { SecretVault } from '../../../../core/services/secret-vault.ts';
import { type LocalRuntimeOptions, LocalRuntime } from '../../../../plugins/apps/runtime/index.ts';
import type { DeployRequest, RouteChange } from '../../../../plugins/apps/runtime/runtime-port.ts';
import type { TapLike } from '../../../helpers/app.ts';

export const FIXTURES = fileURLToPath(new URL('../../../fixtures/apps-runtime/', import.meta.url));

/** Each test's own port range, so tests in parallel files never hand out the same PORT. */
let nextRange = 21_000 + (process.pid % 30) * 300;

export async function stateDir(t: TapLike): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'apps-runtime-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export function portRange(): { first: number; last: number } {
  const first = nextRange;
  nextRange += 20;
  return { first, last: first + 19 };
}

/** The state file's sealer: the vault's own cipher under these keys (newest first), with no store behind it. */
export function sealerOf(entries: readonly string[]): SecretVault {
  const refuse = () => Promise.reject(new Error('the runtime state seals values itself: it stores none in the vault'));
  const store: SecretStore = {
    get: refuse,
    put: refuse,
    delete: refuse,
    deleteOwners: refuse,
    list: refuse,
    listNotUnderKey: refuse,
    reseal: refuse,
  };
  return new SecretVault(() => store, null as never, SecretKeyring.fromEntries(entries));
}

/** This process's key for the runtimes the tests make. */
export const TEST_KEYS = [generateKeyEntry()];

export async function runtimeFor(t: TapLike, options: Partial<LocalRuntimeOptions> = {}): Promise<LocalRuntime> {
  const runtime = await LocalRuntime.create({
    stateDir: options.stateDir ?? (await stateDir(t)),
    ports: portRange(),
    healthTimeoutMs: 10_000,
    stopGraceMs: 2_000,
    sealer: sealerOf(TEST_KEYS),
    ...options,
  });
  t.teardown(() => runtime.close());
  return runtime;
}

/**
 * A fixture app's deploy. The test runner's process tracking adds NODE_OPTIONS (an --import of its
 * own module) to every spawn, whatever env is given; inside the sandbox that module does not exist,
 * so the command drops it, as an app's own start command never needs to.
 */
export function app(serviceId: string, deploymentId: string, script: string, env: Record<string, string> = {}): DeployRequest {
  return { serviceId, deploymentId, artifactDir: artifactOf(deploymentId), startCommand: `exec env -u NODE_OPTIONS node ${script}`, env };
}

/** Where this process's artifacts are: the runtime hands an artifact to its app's uid, so never the repository's own fixtures. */
let artifacts: string | null = null;

/** The fixture apps copied as one deployment's artifact (the same folder for the same deployment). */
export function artifactOf(deploymentId: string): string {
  if (artifacts === null) {
    const root = mkdtempSync(path.join(tmpdir(), 'svc-runtime-artifacts-'));
    process.once('exit', () => rmSync(root, { recursive: true, force: true }));
    artifacts = root;
  }
  const dir = path.join(artifacts, deploymentId);
  if (!existsSync(dir)) cpSync(FIXTURES, dir, { recursive: true });
  return dir;
}

/** GET http://TARGET/PATH: the body, or the error's code. */
export function get(target: string, urlPath = '/'): Promise<{ ok: boolean; body: string }> {
  const [host, port] = target.split(':');
  return new Promise((resolve) => {
    const call = request({ host, port: Number(port), path: urlPath, agent: false }, (response) => {
      let body = '';
      response.on('data', (chunk) => {
        body += chunk;
      });
      response.on('end', () => resolve({ ok: response.statusCode === 200, body }));
      response.on('error', (error) => resolve({ ok: false, body: String(error) }));
    });
    call.on('error', (error: NodeJS.ErrnoException) => resolve({ ok: false, body: error.code ?? error.message }));
    call.end();
  });
}

/** The next route change for a service. */
export function nextRoute(runtime: LocalRuntime, serviceId: string, matches: (change: RouteChange) => boolean = () => true): Promise<RouteChange> {
  return new Promise((resolve) => {
    const off = runtime.onChange((change) => {
      if (change.serviceId === serviceId && matches(change)) {
        off();
        resolve(change);
      }
    });
  });
}
