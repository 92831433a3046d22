import { BuildDecisionError } from './build-errors.ts';
import { goDetector } from './detect-go.ts';
import { nodeDetector } from './detect-node.ts';
import { pythonDetector } from './detect-python.ts';
import { staticDetector } from './detect-static.ts';
import { chosen, type Detection, type Detector } from './detection.ts';
import { readEnvKeys } from './env-keys.ts';
import { readProcfile } from './procfile.ts';
import { checkRootDir, findCandidates } from './root-dir.ts';
import { binaryOf, runtimesOnPath } from './runtime-probe.ts';
import { commandShapeProblem, startCommandProblem } from './start-command.ts';
import type { SourceTree } from './source-tree.ts';
import type { BuildDecision, BuildOverrides, Chosen, Runtime } from './types.ts';

/**
 * The build decision: how a repository's app is installed, built and started, and why. Pure logic
 * over a checked-out tree: nothing is created, so a refusal here is a 400 before any deploy record
 * exists. Rules, in order (this folder's README lists them with every rule name):
 * 1. the folder: the caller's rootDir, else the top, else the one folder below that builds (several:
 *    multiple_apps_require_root_dir);
 * 2. the provider: node, python, go, static, the first that recognises the folder; the others that
 *    do are `alsoMatched`;
 * 3. its runtime must be on this machine;
 * 4. commands: the caller's first, then for start the Procfile's `web:`, then the provider's.
 */
export const DETECTORS: readonly Detector[] = [nodeDetector, pythonDetector, goDetector, staticDetector];

export interface DecideOptions {
  /** The app's folder, relative to the repository's top. */
  readonly rootDir?: string;
  readonly overrides?: BuildOverrides;
  /** The runtimes this machine has; by default, those whose binaries are on PATH. */
  readonly available?: readonly Runtime[];
}

export type DecideResult = { readonly ok: true; readonly decision: BuildDecision } | { readonly ok: false; readonly error: BuildDecisionError };

const refuse = (error: BuildDecisionError): DecideResult => ({ ok: false, error });

export async function decideBuild(tree: SourceTree, options: DecideOptions = {}): Promise<DecideResult> {
  const overrides = options.overrides ?? {};
  for (const field of ['buildCommand', 'installCommand'] as const) {
    const command = overrides[field];
    const problem = command === undefined ? null : commandShapeProblem(command);
    if (problem !== null) return refuse(new BuildDecisionError('invalid_parameter', `${field} ${problem}`, field));
  }

  // 1. The folder.
  let rootDir: string;
  let rootDirChosen: Chosen;
  let detections: Detection[];
  if (options.rootDir !== undefined) {
    const checked = await checkRootDir(tree, options.rootDir);
    if (!checked.ok) return refuse(checked.error);
    rootDir = checked.rootDir;
    rootDirChosen = chosen(rootDir || '.', 'caller_root_dir', `rootDir ${JSON.stringify(options.rootDir)} given`);
    detections = await detect(tree.subtree(rootDir));
    if (detections.length === 0) return refuse(await nothingBuildable(tree.subtree(rootDir), 'rootDir'));
  } else {
    rootDir = '';
    rootDirChosen = chosen('.', 'repository_top', 'the top of the repository is an app');
    detections = await detect(tree);
    if (detections.length === 0) {
      const candidates = await findCandidates(tree, DETECTORS);
      if (candidates.length > 1) {
        const message = `The top of the repository is no app, and ${candidates.length} folders are: choose one with rootDir (${candidates.join(', ')})`;
        return refuse(new BuildDecisionError('multiple_apps_require_root_dir', message, 'rootDir', { candidates }));
      }
      if (candidates.length === 0) return refuse(await nothingBuildable(tree, null));
      rootDir = candidates[0]!;
      rootDirChosen = chosen(rootDir, 'only_app_folder', 'the top of the repository is no app', `${rootDir} is the only folder below it that is one`);
      detections = await detect(tree.subtree(rootDir));
    }
  }
  const app = tree.subtree(rootDir);
  const primary = detections[0]!;

  // 3. The runtime.
  const available = options.available ?? (await runtimesOnPath());
  const runtime = primary.runtime.value;
  if (runtime !== 'static' && !available.includes(runtime)) {
    const message = `This app needs the ${runtime} runtime (${binaryOf(runtime)}), which this service cannot run apps with here; it has ${available.join(', ')}`;
    return refuse(new BuildDecisionError('runtime_unavailable', message, null, { runtime, available }));
  }

  // 4. Commands.
  const lockfiles = primary.conflictingLockfiles;
  if (lockfiles !== undefined && overrides.installCommand === undefined) {
    const message = `The app commits lockfiles of several package managers (${lockfiles.join(', ')}): delete the ones you do not use, or name the manager in package.json's packageManager field`;
    return refuse(new BuildDecisionError('multiple_lockfiles', message, null, { lockfiles }));
  }
  const start = await startOf(app, primary, overrides);
  if (!start.ok) return refuse(start.error);
  const envKeys = await readEnvKeys(app);
  return {
    ok: true,
    decision: {
      rootDir: rootDirChosen,
      provider: primary.provider,
      runtime: primary.runtime,
      framework: primary.framework,
      install: overrides.installCommand !== undefined ? callerCommand(overrides.installCommand, 'installCommand') : primary.install,
      build: overrides.buildCommand !== undefined ? callerCommand(overrides.buildCommand, 'buildCommand') : primary.build,
      start: start.chosen,
      // Only while the provider's own start stands: a caller's command or a Procfile runs a server instead.
      staticRoot: start.chosen === primary.start ? (primary.staticRoot ?? null) : null,
      alsoMatched: detections.slice(1).map((detection) => detection.provider),
      envKeys: envKeys.keys,
      envFile: envKeys.file,
    },
  };
}

async function detect(tree: SourceTree): Promise<Detection[]> {
  const found: Detection[] = [];
  for (const detector of DETECTORS) {
    const detection = await detector.detect(tree);
    if (detection !== null) found.push(detection);
  }
  return found;
}

const callerCommand = (command: string, field: string) => chosen(command.trim(), `caller_${field.replace('Command', '')}_command`, `${field} given with the request`);

type StartResult = { ok: true; chosen: Chosen } | { ok: false; error: BuildDecisionError };

async function startOf(app: SourceTree, primary: Detection, overrides: BuildOverrides): Promise<StartResult> {
  const context = { tree: app, scripts: primary.scripts };
  if (primary.provider === 'static') {
    if (overrides.startCommand !== undefined) {
      const message =
        'This folder is a static site (index.html and no app manifest): its files are served as they are and no start command runs; leave startCommand out, or point rootDir at the app';
      return { ok: false, error: new BuildDecisionError('invalid_parameter', message, 'startCommand') };
    }
    return { ok: true, chosen: primary.start! };
  }
  if (overrides.startCommand !== undefined) {
    const problem = await startCommandProblem(overrides.startCommand, context);
    if (problem !== null) return { ok: false, error: new BuildDecisionError('unfinished_start_command', `startCommand ${problem}`, 'startCommand') };
    return { ok: true, chosen: callerCommand(overrides.startCommand, 'startCommand') };
  }
  const web = (await readProcfile(app))?.processes.get('web');
  if (web !== undefined) {
    const problem = await startCommandProblem(web, context);
    if (problem !== null) {
      const message = `The Procfile's web command ${problem}; or give startCommand, which comes before the Procfile`;
      return { ok: false, error: new BuildDecisionError('unfinished_start_command', message, 'startCommand') };
    }
    return { ok: true, chosen: chosen(web.trim(), 'procfile_web', `Procfile web: ${web.trim()}`) };
  }
  if (primary.start !== null) return { ok: true, chosen: primary.start };
  const message = `How to start this ${primary.provider} app could not be determined: ${primary.startHint ?? 'give startCommand'}`;
  return { ok: false, error: new BuildDecisionError('no_start_command', message, 'startCommand') };
}

/** What is supported, and what the folder holds, so the caller sees why nothing matched. */
export const SUPPORTED = DETECTORS.map((detector) => ({ provider: detector.provider, files: detector.markers }));

const MAX_LISTED_FILES = 50;

async function nothingBuildable(tree: SourceTree, param: 'rootDir' | null): Promise<BuildDecisionError> {
  const entries = await tree.list();
  const topLevelFiles = entries.slice(0, MAX_LISTED_FILES).map((entry) => (entry.kind === 'dir' ? `${entry.name}/` : entry.name));
  const where = tree.rootDir === '' ? 'The top of the repository' : `The folder ${tree.rootDir}`;
  const looked = SUPPORTED.map(({ provider, files }) => `${provider} (${files.join(', ')})`).join(', ');
  const fix =
    param === null ? 'commit one of those files, or point rootDir at the folder that holds the app' : 'point rootDir at the folder that holds the app, or commit one of those files';
  const message = `${where} holds no app this service can build: it looks for ${looked}; ${fix}`;
  return new BuildDecisionError('nothing_buildable', message, param, { supported: SUPPORTED, topLevelFiles });
}
