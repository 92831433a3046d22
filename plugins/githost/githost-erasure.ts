import { z } from 'zod';
import type { JobQueue } from '../../core/jobs/job-queue.ts';
import { defineQueue, type QueueDefinition } from '../../core/jobs/queue-definitions.ts';
import type { OrganizationEraser } from '../../core/kernel/organization-erasure.ts';
import type { SecretVault } from '../../core/services/secret-vault.ts';
import type { GitHostStore } from './githost-store.ts';
import { INSTALLATION_TOKEN_KIND, USER_TOKEN_KIND } from './github/github-api.ts';
import type { LocalRepositories } from './local/local-repos.ts';

const queue = defineQueue({
  name: 'githost.erase-repositories',
  payload: z.strictObject({ organizationId: z.uuid() }),
  maxAttempts: 20,
  leaseMs: 120_000,
  backoff: { baseMs: 10_000, maxMs: 3_600_000 },
});

/** The git host's tables that name an organisation (githost-migrations.ts). */
const GITHOST_TABLES = ['githost_oauth_states', 'githost_authorizations', 'githost_installations', 'githost_settings'] as const;

/**
 * An erased organisation's git repositories. They are folders on disk, which no transaction covers:
 * the eraser enqueues, in the deletion's transaction, a job that removes the organisation's folder
 * once the deletion has committed (a rolled-back deletion keeps every repository; a committed one
 * always gets its job, retried until it succeeds). A repository pushed to while the deletion ran
 * goes with the folder.
 */
export const githostErasure = {
  queue,
  eraser(repos: LocalRepositories, jobs: JobQueue): OrganizationEraser {
    return {
      name: 'git repositories',
      async erase(tx, organizationId) {
        await jobs.enqueue(queue, { organizationId }, { tx, idempotencyKey: organizationId });
        return (await repos.list(organizationId)).length;
      },
    };
  },
  /**
   * The git host's own records, whatever the provider. The organisation's row is kept (a
   * tombstone), so their ON DELETE CASCADE never fires. Contributed after the github eraser, which
   * reads the authorizations it needs first.
   */
  records(): OrganizationEraser {
    return {
      name: 'git host records',
      async erase(tx, organizationId) {
        let rows = 0;
        for (const table of GITHOST_TABLES) rows += (await tx.query(`DELETE FROM ${table} WHERE organization_id = $1`, [organizationId])).rowCount;
        return rows;
      },
    };
  },
  handler(repos: LocalRepositories): QueueDefinition {
    return queue.handle(async (job) => {
      await repos.eraseOrganization(job.payload.organizationId);
    });
  },
};

/**
 * An erased organisation's git-host accounts: its people's GitHub tokens in the secret vault, and the
 * installation tokens of installations no other organisation holds. The rows (settings,
 * installations, authorizations, OAuth states) go with the organisation (ON DELETE CASCADE).
 */
export function githostAccountsEraser(store: GitHostStore, vault: SecretVault): OrganizationEraser {
  return {
    name: 'git host accounts',
    async erase(tx, organizationId) {
      const people = await store.authorizedPeople(tx, organizationId);
      const tokens = await vault.within(tx).deleteOwners(
        USER_TOKEN_KIND,
        people.map((personId) => `${organizationId}:${personId}`),
      );
      const { rows } = await tx.query<{ installation_id: string }>(
        `SELECT DISTINCT installation_id FROM githost_installations mine WHERE organization_id = $1 AND NOT EXISTS (
           SELECT 1 FROM githost_installations other WHERE other.installation_id = mine.installation_id AND other.organization_id <> $1)`,
        [organizationId],
      );
      const installations = await vault.within(tx).deleteOwners(
        INSTALLATION_TOKEN_KIND,
        rows.map((row) => String(row.installation_id)),
      );
      const { rowCount } = await tx.query('DELETE FROM githost_installations WHERE organization_id = $1', [organizationId]);
      return tokens + installations + rowCount;
    },
  };
}
