import { z } from 'zod';
import { defineEventTypes, type PayloadsOf } from '../../core/events/event-catalogue.ts';

const commitId = z.string().regex(/^[0-9a-f]{40}$/);

/** What a push changed, one event per branch it moved (a tag or other ref moves no app and is not told). */
export const GITHOST_EVENTS = defineEventTypes('githost', {
  'githost.pushed': {
    schema: z.object({
      provider: z.enum(['local', 'github']),
      repo: z.string().describe('The repository: a name on the local git server, owner/name on GitHub'),
      branch: z.string().describe('The branch, without refs/heads/'),
      before: commitId.nullable().describe('The commit the branch pointed at before the push; null when the push created it'),
      after: commitId.nullable().describe('The commit it points at now; null when the push deleted it'),
    }),
    description: 'A push moved a branch of a git repository of the organisation (created, updated or deleted it)',
    public: true,
    example: {
      provider: 'local',
      repo: 'hello',
      branch: 'main',
      before: '4b825dc642cb6eb9a060e54bf8d69288fbee4904',
      after: '9fceb02d0ae598e95dc970b74767f19372d61af8',
    },
  },
});

declare module '../../core/events/domain-events.ts' {
  interface EventCatalogue extends PayloadsOf<typeof GITHOST_EVENTS> {}
}
