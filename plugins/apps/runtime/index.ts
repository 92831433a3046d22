/**
 * The runtime port and its `local` implementation, for the apps plugin's deploys and its proxy
 * (README.md beside this file).
 */
export { type LocalRuntimeOptions, DEFAULT_LIMITS, LocalRuntime } from './local-runtime.ts';
export {
  type DeployRequest,
  HealthFailure,
  type Instance,
  type InstanceUsage,
  type LogLine,
  type LogOptions,
  type RouteChange,
  type RunResult,
  RuntimeError,
  type RuntimeEvent,
  type RuntimeLimits,
  type RuntimePort,
  type SandboxKind,
  type ServiceState,
  type ServiceStatus,
} from './runtime-port.ts';
export { type ProcUnits, type TreeUsage, treeUsage } from './usage.ts';
export {
  FileRuntimeState,
  type RuntimeState,
  type ServiceRecord,
  type StateSealer,
  stateFileKeyIds,
} from './runtime-state.ts';
