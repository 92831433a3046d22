import type { DomainEvents } from '../../../core/events/domain-events.ts';
import type { Credential } from '../../../core/identity/credential.ts';
import { actorOf } from '../../../core/operations/operation-events.ts';
import type { Database } from '../../../core/ports/database.ts';
import type { GitBranch } from '../git-host.ts';
import { branchChanges, type LocalRepositories, readBranches } from './local-repos.ts';
import '../githost-events.ts';

/**
 * Turns pushes into `githost.pushed` events: the branches of a repository are read before a push
 * and after it, and each branch that moved is one event. Pushes to one repository run one at a
 * time in this process, so a push is never credited with another's changes (the local git server
 * is one machine's disk: a second replica serving the same folder would need a lock of its own).
 */
export class PushRecorder {
  private readonly tails = new Map<string, Promise<void>>();

  constructor(
    private readonly deps: {
      repos: LocalRepositories;
      database: Database;
      events: DomainEvents;
    },
  ) {}

  /**
   * Runs `push` with the repository to itself. It receives `record`, to call once the push has
   * ended (whatever its outcome: a push cut short may still have moved a branch); `record` reads
   * the branches again, emits the events and lets the next push in. A push that throws before
   * calling it lets the next one in at once.
   */
  async during<T>(organizationId: string, repo: string, credential: Credential, push: (record: () => Promise<void>) => Promise<T>): Promise<T> {
    const key = `${organizationId}/${repo}`;
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const turn = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => turn);
    this.tails.set(key, tail);
    const done = () => {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    };
    await previous;
    let before: GitBranch[];
    try {
      before = await readBranches(await this.deps.repos.require(organizationId, repo));
    } catch (error) {
      done();
      throw error;
    }
    let recorded: Promise<void> | null = null;
    const record = () => {
      recorded ??= this.emitChanges(organizationId, repo, credential, before).finally(done);
      return recorded;
    };
    try {
      return await push(record);
    } catch (error) {
      await record().catch(() => undefined);
      throw error;
    }
  }

  private async emitChanges(organizationId: string, repo: string, credential: Credential, before: GitBranch[]): Promise<void> {
    const after = await readBranches(await this.deps.repos.require(organizationId, repo));
    const changes = branchChanges(before, after);
    if (changes.length === 0) return;
    await this.deps.database.transaction(async (tx) => {
      for (const change of changes) {
        await this.deps.events.emit(tx, {
          type: 'githost.pushed',
          organizationId,
          subject: repo,
          data: { provider: 'local', repo, branch: change.branch, before: change.before, after: change.after },
          actor: actorOf(credential),
        });
      }
    });
  }
}
