import { randomBytes } from 'node:crypto';
import type { Database, Queryable } from '../../../core/ports/database.ts';
import type { SecretVault } from '../../../core/services/secret-vault.ts';
import type { GitHostStore, Installation } from '../githost-store.ts';
import { type GitHubApi, GitHubApiError, type GitHubInstallation, stateHash } from './github-api.ts';

/** Where GitHub sends the browser back after the person authorized the app or installed it. */
export const CALLBACK_PATH = '/client/githost/callback';
/** How long a person has to come back from GitHub. */
const STATE_TTL_MS = 10 * 60_000;

export type ClaimOutcome = { ok: true; installation: Installation } | { ok: false; reason: 'not_authorized' | 'not_visible' | 'claimed' };

/**
 * People's GitHub accounts and the installations organisations hold: the OAuth round trip (state,
 * code, token in the vault), and claiming an installation the person's account can reach.
 */
export class GitHubConnections {
  constructor(
    private readonly deps: {
      api: GitHubApi;
      store: GitHostStore;
      database: Database;
      vault: SecretVault;
      clock: () => Date;
    },
  ) {}

  redirectUri(origin: string): string {
    return new URL(CALLBACK_PATH, origin).href;
  }

  /** A fresh state for one round trip to GitHub, bound to the person and organisation. */
  async begin(organizationId: string, personId: string): Promise<{ state: string; expiresAt: Date }> {
    const state = randomBytes(32).toString('base64url');
    const expiresAt = new Date(this.deps.clock().getTime() + STATE_TTL_MS);
    await this.deps.store.saveState(organizationId, personId, stateHash(state), expiresAt);
    return { state, expiresAt };
  }

  /**
   * The callback: the state consumed (once, unexpired), the code traded for the person's token, stored
   * in the vault with their GitHub identity; an installation GitHub names (after an install) is claimed.
   */
  async complete(input: {
    state: string;
    code: string | null;
    installationId: number | null;
    redirectUri: string;
  }): Promise<{ ok: true; login: string | null; claimed: ClaimOutcome | null } | { ok: false; reason: 'state' | 'code' }> {
    const { api, store, database, vault, clock } = this.deps;
    const who = await store.takeState(database, stateHash(input.state), clock());
    if (who === null) return { ok: false, reason: 'state' };
    let login: string | null = null;
    if (input.code !== null) {
      let token: { accessToken: string; refreshToken: string | null };
      try {
        token = await api.exchangeCode(input.code, input.redirectUri);
      } catch (error) {
        if (error instanceof GitHubApiError && error.status < 500) return { ok: false, reason: 'code' };
        throw error;
      }
      const user = await api.user(token.accessToken);
      await database.transaction(async (tx) => {
        await store.saveAuthorization(tx, who.organizationId, who.personId, user, clock());
        await api.storeUserToken(vault.within(tx), who.organizationId, who.personId, token);
      });
      login = user.login;
    }
    const claimed = input.installationId === null ? null : await this.claim(who.organizationId, who.personId, input.installationId);
    return { ok: true, login, claimed };
  }

  /** The installations the person's GitHub account reaches; null when they have not connected it (or GitHub no longer takes the token). */
  async reachable(organizationId: string, personId: string): Promise<GitHubInstallation[] | null> {
    const token = await this.deps.api.userToken(organizationId, personId);
    if (token === null) return null;
    try {
      return await this.deps.api.userInstallations(token);
    } catch (error) {
      if (error instanceof GitHubApiError && error.status === 401) return null;
      throw error;
    }
  }

  /**
   * Links an installation to the organisation: the person's GitHub account must reach it, and another
   * organisation holding it must share it. Holding it already is no change.
   */
  async claim(
    organizationId: string,
    personId: string,
    installationId: number,
    /** Runs the write in a transaction (an operation's own, so the call is recorded with it); GitHub is asked before. */
    inTransaction: (fn: (tx: Queryable) => Promise<ClaimOutcome>) => Promise<ClaimOutcome> = (fn) => this.deps.database.transaction(fn),
  ): Promise<ClaimOutcome> {
    const reachable = await this.reachable(organizationId, personId);
    if (reachable === null) return { ok: false, reason: 'not_authorized' };
    const found = reachable.find((installation) => installation.id === installationId);
    if (!found) return { ok: false, reason: 'not_visible' };
    const run = async (tx: Queryable): Promise<ClaimOutcome> => {
      const holders = await this.deps.store.holders(tx, installationId);
      const others = holders.filter((holder) => holder.organizationId !== organizationId);
      if (others.length > 0 && !others.some((holder) => holder.shared)) return { ok: false, reason: 'claimed' };
      const installation = { installationId, accountLogin: found.accountLogin, accountType: found.accountType, claimedBy: personId };
      await this.deps.store.addInstallation(tx, organizationId, installation, this.deps.clock());
      const mine = holders.find((holder) => holder.organizationId === organizationId);
      const shared = mine?.shared ?? false;
      return { ok: true, installation: { installationId, accountLogin: found.accountLogin, accountType: found.accountType, shared, createdAt: this.deps.clock() } };
    };
    return inTransaction(run);
  }

  /** Forgets the person's GitHub account here: the row and every token of theirs in the vault. */
  async disconnect(tx: Queryable, organizationId: string, personId: string): Promise<boolean> {
    const had = await this.deps.store.deleteAuthorization(tx, organizationId, personId);
    const owner = this.deps.api.userTokenOwner(organizationId, personId);
    await this.deps.vault.within(tx).deleteOwners(owner.kind, [owner.id]);
    return had;
  }
}
