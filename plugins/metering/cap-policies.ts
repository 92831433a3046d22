import type { IdentityStores, SpendCap } from '../../core/ports/identity.ts';

interface Cached<T> {
  value: T;
  until: number;
}

export interface AccountPolicy {
  cap: SpendCap | null;
  requestLogging: boolean;
}

export interface ProjectPolicy {
  cap: SpendCap | null;
}

/**
 * Account and project settings that admission reads on every call, cached for a short TTL so the
 * hot path does not query the database; changes apply within that TTL on every replica.
 */
export class CapPolicies {
  private readonly accounts = new Map<string, Cached<AccountPolicy>>();
  private readonly projects = new Map<string, Cached<ProjectPolicy>>();
  /** Reads under way: when an entry expires, the calls waiting on it share one query. */
  private readonly loading = new Map<string, Promise<AccountPolicy | ProjectPolicy>>();

  constructor(
    private readonly identity: IdentityStores,
    private readonly ttlMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** The cached policy while it is fresh: the hot path reads it without a promise. */
  accountIfCached(organizationId: string): AccountPolicy | undefined {
    const hit = this.accounts.get(organizationId);
    return hit && hit.until > this.now() ? hit.value : undefined;
  }

  projectIfCached(projectId: string): ProjectPolicy | undefined {
    const hit = this.projects.get(projectId);
    return hit && hit.until > this.now() ? hit.value : undefined;
  }

  async account(organizationId: string): Promise<AccountPolicy> {
    const hit = this.accountIfCached(organizationId);
    if (hit) return hit;
    return this.once(`account:${organizationId}`, async () => {
      const organization = await this.identity.organizations.get(organizationId);
      const value = { cap: organization?.spendCap ?? null, requestLogging: organization?.requestLogging ?? false };
      this.accounts.set(organizationId, { value, until: this.now() + this.ttlMs });
      return value;
    });
  }

  async project(organizationId: string, projectId: string): Promise<ProjectPolicy> {
    const hit = this.projectIfCached(projectId);
    if (hit) return hit;
    return this.once(`project:${projectId}`, async () => {
      const project = await this.identity.projects.get(organizationId, projectId);
      const value = { cap: project?.spendCap ?? null };
      this.projects.set(projectId, { value, until: this.now() + this.ttlMs });
      return value;
    });
  }

  private once<T extends AccountPolicy | ProjectPolicy>(key: string, load: () => Promise<T>): Promise<T> {
    const pending = this.loading.get(key) as Promise<T> | undefined;
    if (pending) return pending;
    const loaded = load().finally(() => this.loading.delete(key));
    this.loading.set(key, loaded);
    return loaded;
  }

  /** After an owner changes a setting on this replica: read it again now. */
  forget(organizationId: string): void {
    this.accounts.delete(organizationId);
  }
}
