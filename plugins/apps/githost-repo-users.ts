import type { GitHostRepoUsers } from '../githost/git-host.ts';

/**
 * The apps deploying from repositories of the git host, for the repository allow-list: narrowing it
 * under one of them is a 409 (plugins/githost, PUT /githost/repo-allow-list).
 */
export const appsRepoUsers: GitHostRepoUsers = {
  name: 'apps',
  async reposInUse(db, organizationId) {
    const { rows } = await db.query<{ name: string; source_repo: string }>(
      `SELECT name, source_repo FROM apps WHERE organization_id = $1 AND source_kind = 'githost' AND source_repo IS NOT NULL ORDER BY name`,
      [organizationId],
    );
    return rows.map((row) => ({ repo: row.source_repo, usedBy: `app ${row.name}` }));
  },
};
