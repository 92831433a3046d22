import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { GatewayCalls } from '../../../core/gateway/gateway-calls.ts';
import { authorizedRecord } from '../../../core/identity/authorization.ts';
import { ApiError } from '../../../core/kernel/errors.ts';
import { defineOperation, type AnyOperation } from '../../../core/operations/operations.ts';
import type { BlobStore } from '../../../core/ports/blobs.ts';
import { callGateway, PASSED_THROUGH } from '../../support/assistant-gateway.ts';
import { serviceRecordKind } from '../apps-operations.ts';
import type { AppsStore, DeploymentRecord } from '../apps-store.ts';
import type { AiFix, UpkeepStore } from './upkeep-store.ts';
import './upkeep-errors.ts';

export interface AutofixDeps {
  store: AppsStore;
  upkeep: UpkeepStore;
  blobs: BlobStore;
  /** Absent when the inference plugin is off: autofix then answers the gateway's absence. */
  gateway: GatewayCalls | null;
  clock: () => Date;
  settings: { model: string; logLines: number; keep: number };
}

const INSTRUCTIONS = [
  'You fix failed deployments of apps built from git and run on a small platform (node, python, go, static).',
  'You are given how the platform decided to build the app, why the deployment failed and the end of its build log.',
  'Answer in plain text: first one sentence naming the cause, then the change to make (a file and its edit, a start',
  'command, a variable to set), as short as it can be. Never invent log lines; say so when the log does not show the cause.',
].join(' ');

const idParams = z.strictObject({ id: z.uuid() });

const fixView = z
  .object({
    object: z.literal('ai_fix'),
    id: z.string(),
    serviceId: z.string(),
    deploymentId: z.string().describe('The failed deployment it reads'),
    model: z.string(),
    requestId: z.string().describe('The gateway call, as the request log names it; billed like POST /v1/chat/completions'),
    proposal: z.string().describe('The cause and the change to make, in the model’s words'),
    createdAt: z.string(),
  })
  .meta({ id: 'AiFix', description: 'A fix a gateway model proposed for a failed deployment' });

const fixListView = z.object({ object: z.literal('list'), data: z.array(fixView) }).meta({ id: 'AiFixList', description: 'Proposed fixes, newest first' });

const fixesDeletedView = z
  .object({ object: z.literal('ai_fixes_deleted'), serviceId: z.string(), deleted: z.number().describe('How many were forgotten') })
  .meta({ id: 'AiFixesDeleted', description: 'The service’s proposed fixes are gone' });

const toView = (fix: AiFix) => ({
  object: 'ai_fix' as const,
  id: fix.id,
  serviceId: fix.serviceId,
  deploymentId: fix.deploymentId,
  model: fix.model,
  requestId: fix.requestId,
  proposal: fix.proposal,
  createdAt: fix.createdAt.toISOString(),
});

/** What the model reads: the decision, the failure and the build log's last lines. */
export function fixPrompt(app: { name: string }, deployment: DeploymentRecord, logLines: readonly string[]): string {
  const decision = deployment.decision;
  const field = (name: string) => {
    const chosen = decision?.[name] as { value?: unknown; rule?: unknown } | undefined;
    return chosen && typeof chosen === 'object' ? `${JSON.stringify(chosen.value ?? null)} (${String(chosen.rule ?? '')})` : 'unknown';
  };
  return [
    `App: ${app.name}`,
    `Commit: ${deployment.commitSha ?? 'unknown'}`,
    `Build decision: provider ${String(decision?.['provider'] ?? 'unknown')}; root dir ${field('rootDir')}; install ${field('install')}; ` +
      `build ${field('build')}; start ${field('start')}`,
    `Failure: ${deployment.failureReason ?? 'unknown'}`,
    'Build log (last lines, `<time> <stream> <text>`):',
    ...logLines,
  ].join('\n');
}

/**
 * `POST /services/{id}/autofix`: a gateway model reads a failed deployment's build decision, failure
 * and build log and proposes a fix, stored on the service; one chat completion through the gateway
 * in-process (core/gateway/gateway-calls.ts), billed and logged as the caller's /v1 call.
 */
export function autofixOperations(deps: AutofixDeps): AnyOperation[] {
  const { store, upkeep, blobs, clock, settings } = deps;
  const serviceKind = serviceRecordKind(store);
  const readService = { kind: serviceKind, access: 'read', in: 'path', field: 'id' } as const;
  const writeService = { kind: serviceKind, access: 'write', in: 'path', field: 'id' } as const;

  async function logTail(deployment: DeploymentRecord): Promise<string[]> {
    const blob = deployment.logBlob ? await blobs.get(deployment.logBlob) : null;
    if (!blob) return [];
    let text = '';
    for await (const chunk of blob.stream) text += chunk.toString();
    return text
      .split('\n')
      .filter((line) => line.length > 0)
      .slice(-settings.logLines)
      .map((line) => line.slice(0, 2_000));
  }

  const propose = defineOperation({
    name: 'services.autofix',
    method: 'POST',
    path: '/services/:id/autofix',
    summary: 'Have a model read a failed deployment and propose a fix',
    description:
      `One chat completion (\`plugins.apps.autofix.model\`, default ${settings.model}, unless \`model\` names another ` +
      'the caller may use) reads the deployment’s build decision, failure reason and the last lines of its build log; the ' +
      'proposal is stored on the service (GET /services/{id}/ai-fixes). Billed like a /v1 call to the calling key (for a ' +
      'person, the organisation), under its model access, caps and rate limits; apps:deploy is enough (the prompt is the ' +
      'service’s own, so the inference scope is not needed). Without `deploymentId`, the latest failed ' +
      'deployment; 409 `nothing_to_fix` when there is none, or the one named did not fail.',
    scope: 'apps:deploy',
    readOnly: false,
    idempotent: false,
    params: idParams,
    body: z.strictObject({
      deploymentId: z.uuid().optional().describe('A failed deployment of the service (default: the latest failed one)'),
      model: z.string().min(1).max(200).optional().describe('A chat model of the gateway the caller may use'),
    }),
    bodyRequired: false,
    resource: writeService,
    output: fixView,
    errors: ['nothing_to_fix', 'autofix_model_failed', 'route_not_found', ...PASSED_THROUGH],
    async handler({ body }, { authorization, credential }) {
      const { service, app } = authorizedRecord(authorization, serviceKind).record;
      if (!deps.gateway) throw new ApiError('route_not_found', 'No models are served here (the inference plugin is off)');
      const history = await store.history(service.id);
      const deployment = body?.deploymentId ? history.find((entry) => entry.id === body.deploymentId) : history.find((entry) => entry.status === 'failed');
      if (deployment?.status !== 'failed') {
        throw new ApiError('nothing_to_fix', body?.deploymentId ? 'That deployment is not a failed one of the service’s last 20' : undefined, {
          param: body?.deploymentId ? 'deploymentId' : null,
        });
      }
      const model = body?.model ?? settings.model;
      const request = {
        model,
        messages: [
          { role: 'system', content: INSTRUCTIONS },
          { role: 'user', content: fixPrompt(app, deployment, await logTail(deployment)) },
        ],
      };
      // The prompt is the service's own, not the caller's: apps:deploy alone may ask for a fix, the
      // gateway's inference scope check is passed for this call only; the key's model access, spend
      // caps, rate limits and billing apply as to any /v1 call it makes.
      const asCaller = { ...credential, scopes: new Set([...credential.scopes, 'inference' as const]) };
      const answer = await callGateway(deps.gateway, asCaller, '/v1/chat/completions', request, ['model'], 'autofix_model_failed');
      const content = (answer.body['choices'] as Array<{ message?: { content?: unknown } }> | undefined)?.[0]?.message?.content;
      if (typeof content !== 'string' || content.trim() === '') throw new ApiError('autofix_model_failed');
      const fix: AiFix = {
        id: randomUUID(),
        serviceId: service.id,
        organizationId: service.organizationId,
        deploymentId: deployment.id,
        model: typeof answer.body['model'] === 'string' ? answer.body['model'] : model,
        requestId: answer.requestId,
        proposal: content.trim(),
        createdAt: clock(),
      };
      await upkeep.addFix(fix, settings.keep);
      return toView(fix);
    },
  });

  const list = defineOperation({
    name: 'services.ai_fixes.list',
    method: 'GET',
    path: '/services/:id/ai-fixes',
    summary: 'Fixes models proposed for the service’s failed deployments, newest first',
    scope: null,
    readOnly: true,
    params: idParams,
    query: z.strictObject({ deploymentId: z.uuid().optional().describe('Only the fixes for this deployment') }),
    resource: readService,
    output: fixListView,
    async handler({ query }, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      const fixes = await upkeep.fixes(service.id);
      const data = query.deploymentId ? fixes.filter((fix) => fix.deploymentId === query.deploymentId) : fixes;
      return { object: 'list' as const, data: data.map(toView) };
    },
  });

  const clear = defineOperation({
    name: 'services.ai_fixes.delete',
    method: 'DELETE',
    path: '/services/:id/ai-fixes',
    summary: 'Forget every fix proposed for the service',
    scope: 'apps:deploy',
    readOnly: false,
    destructive: true,
    idempotent: true,
    params: idParams,
    resource: writeService,
    output: fixesDeletedView,
    async handler(_input, { authorization }) {
      const { service } = authorizedRecord(authorization, serviceKind).record;
      return { object: 'ai_fixes_deleted' as const, serviceId: service.id, deleted: await upkeep.deleteFixes(service.id) };
    },
  });

  return [propose, list, clear];
}
