import { z } from 'zod';
import { authorizedRecord } from '../../../core/identity/authorization.ts';
import { ApiError } from '../../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../../core/operations/operations.ts';
import type { AppsHost } from '../apps-host.ts';
import type { AppsStore } from '../apps-store.ts';
import { serviceRecordKind } from '../apps-operations.ts';
import { commandShapeProblem } from '../build-decision/start-command.ts';
import type { DeployHooks } from '../deploy-pipeline.ts';
import { RuntimeError } from '../runtime/index.ts';
import type { UpkeepStore } from './upkeep-store.ts';
import './upkeep-errors.ts';

/** Output lines of a release command written into the build log (the rest is cut). */
const RELEASE_LOG_LINES = 2_000;

export interface ReleaseDeps {
  store: AppsStore;
  upkeep: UpkeepStore;
  host: AppsHost;
  clock: () => Date;
  timeoutMs: number;
}

/**
 * The release command (Heroku's `release` phase, Dokku's `predeploy`): a one-off command, usually
 * the database migrations, run by the runtime's `run` against a deployment's build and env after it
 * is built and before it starts. Its output goes into the deployment's build log; a failure (an exit
 * code other than 0, a timeout) fails the deployment and the running version keeps serving.
 */
export function releaseHook(deps: ReleaseDeps): Required<Pick<DeployHooks, 'beforeStart'>> {
  return {
    async beforeStart(context, build) {
      const { releaseCommand } = await deps.upkeep.settings(context.service.id);
      if (!releaseCommand) return;
      context.log('release', `$ ${releaseCommand}`);
      const result = await deps.host.runtime().run(context.service.id, releaseCommand, {
        timeoutMs: deps.timeoutMs,
        build: { deploymentId: context.deployment.id, artifactDir: build.artifactDir, env: build.env },
      });
      for (const line of outputLines(result.output).slice(-RELEASE_LOG_LINES)) context.log('release', line);
      const problem = failureOf(result, deps.timeoutMs);
      if (problem) throw new Error(`release command (${releaseCommand}) ${problem}`);
      context.log('release', 'release command succeeded');
    },
  };
}

function outputLines(output: string): string[] {
  const lines = output.split('\n');
  if (lines.at(-1) === '') lines.pop();
  return lines;
}

function failureOf(result: { exitCode: number | null; signal: string | null; timedOut: boolean }, timeoutMs: number): string | null {
  if (result.timedOut) return `did not finish within ${Math.round(timeoutMs / 1000)}s`;
  if (result.exitCode === 0) return null;
  return `failed with ${result.exitCode === null ? `signal ${result.signal}` : `exit code ${result.exitCode}`}`;
}

const idParams = z.strictObject({ id: z.uuid() });

const releaseCommandView = z
  .object({
    object: z.literal('release_command'),
    serviceId: z.string(),
    command: z.string().nullable().describe('Run before each deployment starts; null: none'),
    timeoutSeconds: z.number().describe('How long it may run before the deployment fails'),
    updatedAt: z.string().nullable(),
  })
  .meta({ id: 'ReleaseCommand', description: 'The command run against each new build before it starts (migrations)' });

const releaseRunView = z
  .object({
    object: z.literal('release_run'),
    serviceId: z.string(),
    deploymentId: z.string().describe('The live deployment it ran beside'),
    command: z.string(),
    succeeded: z.boolean(),
    exitCode: z.number().nullable().describe('Null when a signal ended it'),
    signal: z.string().nullable(),
    timedOut: z.boolean(),
    output: z.string().describe('stdout and stderr as they came (at most 1 MiB)'),
  })
  .meta({ id: 'ReleaseRun', description: 'One run of the release command beside the live deployment' });

export function releaseOperations(deps: ReleaseDeps): AnyOperation[] {
  const serviceKind = serviceRecordKind(deps.store);
  const readService = { kind: serviceKind, access: 'read', in: 'path', field: 'id' } as const;
  const writeService = { kind: serviceKind, access: 'write', in: 'path', field: 'id' } as const;
  const view = (serviceId: string, settings: { releaseCommand: string | null; updatedAt: Date | null }) => ({
    object: 'release_command' as const,
    serviceId,
    command: settings.releaseCommand,
    timeoutSeconds: Math.round(deps.timeoutMs / 1000),
    updatedAt: settings.updatedAt?.toISOString() ?? null,
  });

  const read = defineOperation({
    name: 'services.migrate.get',
    method: 'GET',
    path: '/services/:id/migrate',
    summary: 'The service’s release command (migrations run before each deployment starts)',
    scope: null,
    readOnly: true,
    params: idParams,
    resource: readService,
    output: releaseCommandView,
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      return view(service.id, await deps.upkeep.settings(service.id));
    },
  });

  const set = defineOperation({
    name: 'services.migrate.set',
    method: 'POST',
    path: '/services/:id/migrate',
    summary: 'Set or clear the release command run before each deployment starts',
    description:
      'Runs in the app’s sandbox against the new build and its env after the build, before the start; its output is in ' +
      'the deployment’s build log. A failure (exit code other than 0, a timeout) fails the deployment: the running ' +
      'version keeps serving. Takes effect from the next deployment; POST /services/{id}/migrations runs it now.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: true,
    params: idParams,
    body: z.strictObject({
      command: z.string().max(300).nullable().describe('One line, at most 300 characters, run with sh in the app’s folder (e.g. `npm run migrate`); null clears it'),
    }),
    resource: writeService,
    output: releaseCommandView,
    async handler({ body }, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const command = body.command === null ? null : body.command.trim();
      if (command !== null) {
        const problem = commandShapeProblem(command);
        if (problem) throw new ApiError('invalid_parameter', `The release command ${problem}`, { param: 'command' });
      }
      const settings = await deps.upkeep.updateSettings(service.id, service.organizationId, { releaseCommand: command }, deps.clock());
      return view(service.id, settings);
    },
  });

  const run = defineOperation({
    name: 'services.migrations.run',
    method: 'POST',
    path: '/services/:id/migrations',
    summary: 'Run the release command now, beside the live deployment',
    description: 'With the live build and env; answers once it ended, with its output. Nothing restarts.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    params: idParams,
    resource: writeService,
    output: releaseRunView,
    errors: ['no_release_command', 'nothing_to_start', 'runtime_unavailable_here'],
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const { releaseCommand } = await deps.upkeep.settings(service.id);
      if (!releaseCommand) throw new ApiError('no_release_command');
      const runtime = deps.host.runtime();
      try {
        const live = (await runtime.status(service.id)).deploymentId;
        if (!live) throw new RuntimeError('nothing_deployed', 'no live deployment');
        const result = await runtime.run(service.id, releaseCommand, { timeoutMs: deps.timeoutMs });
        return {
          object: 'release_run' as const,
          serviceId: service.id,
          deploymentId: live,
          command: releaseCommand,
          succeeded: failureOf(result, deps.timeoutMs) === null,
          exitCode: result.exitCode,
          signal: result.signal,
          timedOut: result.timedOut,
          output: result.output,
        };
      } catch (error) {
        if (error instanceof RuntimeError && (error.code === 'nothing_deployed' || error.code === 'unknown_service')) {
          throw new ApiError('nothing_to_start', 'The service has no live deployment to run the release command beside');
        }
        throw error;
      }
    },
  });

  return [read, set, run];
}
