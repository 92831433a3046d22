import { LocalRuntime } from '../../../../plugins/apps/runtime/index.ts';
import { sealerOf } from './runtime-helpers.ts';
import type { DeployRequest } from '../../../../plugins/apps/runtime/runtime-port.ts';

/**
 * A runtime's host as its own process, for the restore test to SIGKILL: restores what the state
 * says should run, deploys RUNTIME_HOST_DEPLOY when given, prints one JSON line with each
 * service's target, then keeps running until killed.
 */
const { stateDir, ports, bwrapPath, deploy, keys } = JSON.parse(process.env['RUNTIME_HOST'] ?? '{}') as {
  stateDir: string;
  /** The secret keys, newest first: what seals the state file. */
  keys: string[];
  ports: { first: number; last: number };
  bwrapPath: string | null;
  deploy: DeployRequest | null;
};
const sealer = sealerOf(keys);
const runtime = await LocalRuntime.create({ stateDir, ports, bwrapPath, healthTimeoutMs: 10_000, sealer });
const { restored, failed } = await runtime.restoreAll();
const instance = deploy ? await runtime.deploy(deploy) : null;
const serviceId = deploy?.serviceId ?? restored[0];
const status = serviceId ? await runtime.status(serviceId) : null;
const failures = failed.map((one) => `${one.serviceId}: ${one.error.message}`);
process.stdout.write(`${JSON.stringify({ restored, failures, instances: status?.instances ?? [], deployed: instance })}\n`);
setInterval(() => {}, 60_000);
