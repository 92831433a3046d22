import { randomUUID } from 'node:crypto';
import { defineSubscriber } from '../../core/events/domain-events.ts';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import type { AppsStore } from './apps-store.ts';
import { enqueueDeployment } from './deploy-pipeline.ts';

/**
 * `githost.pushed` on a branch an app tracks with deployOnPush: one deployment of the commit pushed
 * per app, created with its job in the transaction that completes the event's delivery. The key
 * `<service>:<commit>` keeps a commit queued twice (a redelivered event, the same commit pushed to
 * the branch again) to one deployment.
 */
export function pushDeploySubscriber(deps: { store: AppsStore; jobs: JobQueue; clock: () => Date }) {
  return defineSubscriber({
    name: 'apps.deploy-on-push',
    events: ['githost.pushed'],
    async handle(event, job) {
      const { repo, branch, after } = event.data;
      if (after === null || event.organizationId === null) return;
      const apps = (await deps.store.tracking(event.organizationId, repo, branch)).filter((app) => app.deployOnPush);
      const services = (await Promise.all(apps.map((app) => deps.store.services(app.id)))).flat();
      await job.complete(async (tx) => {
        for (const service of services) {
          const { deployment, created } = await deps.store.createDeployment(
            tx,
            {
              id: randomUUID(),
              serviceId: service.id,
              organizationId: service.organizationId,
              commitSha: after,
              reason: 'push',
              rollbackOf: null,
              decision: null,
              idempotencyKey: `${service.id}:${after}`,
            },
            deps.clock(),
          );
          if (created) await enqueueDeployment(deps.jobs, tx, deployment.id);
        }
      });
    },
  });
}
