/**
 * The build decision's surface for the apps plugin's routes and deploys: decide over a checked-out
 * tree, and say which of the variables the app asks for nothing sets.
 */
export { BUILD_DECISION_ERRORS, BuildDecisionError } from './build-errors.ts';
export { type DecideOptions, type DecideResult, decideBuild, SUPPORTED } from './decide.ts';
export { ENV_EXAMPLE_FILES, type EnvSources, missingEnv, SERVICE_SET_ENV, serviceProvidedEnv } from './env-keys.ts';
export { runtimesOnPath } from './runtime-probe.ts';
export { MAX_START_COMMAND_CHARS } from './start-command.ts';
export { DEFAULT_TREE_LIMITS, SourceTree, type SourceTreeLimits } from './source-tree.ts';
export type { BuildDecision, BuildOverrides, Chosen, Provider, Runtime } from './types.ts';
