import { createHash } from 'node:crypto';
import type { OutboundHttpClient } from '../../core/net/outbound-http-client.ts';
import { type OpenUpstream, openUpstream, UpstreamFailure, type UpstreamSession, type UpstreamTarget } from './upstream-connection.ts';

export interface UpstreamSessionLimits {
  /** The most bytes one answer may carry (the calls' cap). */
  maxAnswerBytes: number;
  /** A session nobody used for this long is closed. */
  idleMs: number;
  /** Sessions kept open by this process at most; the least recently used idle one goes first. */
  maxSessions: number;
}

interface Entry {
  key: string;
  opening: Promise<OpenUpstream>;
  /** Calls running on the session now: it is closed only when none is. */
  inUse: number;
  /** No new call takes it (it failed, went idle, or was pushed out); it closes when the last call ends. */
  retired: boolean;
  closed: boolean;
  idleTimer: NodeJS.Timeout | null;
}

/**
 * Tool calls' MCP sessions, kept open per upstream and credential, so a call is one request to the
 * server instead of three (initialize, its notification, the call). A session is keyed by everything
 * that shapes it (upstream, URL, transport, timeout and a hash of the credential's headers): a changed
 * secret, a refreshed OAuth token or an edited upstream opens a new one, and the old one idles out.
 * Calls share a session concurrently (MCP requests carry their own ids, progress tokens and
 * cancellation). A session that fails is retired; one the server has forgotten (HTTP 404, as the
 * Streamable HTTP transport says a server answers an ended session) is replaced and the call sent
 * once more, since the server refused it unread.
 */
export class UpstreamSessions {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly http: OutboundHttpClient,
    private readonly limits: UpstreamSessionLimits,
  ) {}

  async use<T>(target: UpstreamTarget, what: string, use: (session: UpstreamSession) => Promise<T>, signal?: AbortSignal): Promise<T> {
    const key = sessionKey(target);
    const reused = this.entries.has(key);
    try {
      return await this.attempt(key, target, what, use);
    } catch (error) {
      const forgotten = reused && error instanceof UpstreamFailure && error.kind === 'http_status' && / 404\b/.test(error.message);
      if (!forgotten || signal?.aborted) throw error;
      return this.attempt(key, target, what, use);
    }
  }

  /** Closes every session (at shutdown); calls still running on one are aborted with it. */
  async close(): Promise<void> {
    const entries = [...this.entries.values()];
    this.entries.clear();
    await Promise.all(entries.map((entry) => this.shut(entry)));
  }

  private async attempt<T>(key: string, target: UpstreamTarget, what: string, use: (session: UpstreamSession) => Promise<T>): Promise<T> {
    const entry = this.acquire(key, target);
    let open: OpenUpstream;
    try {
      open = await entry.opening;
    } catch (error) {
      this.release(entry, true);
      throw error;
    }
    let failed = false;
    try {
      return await use(open.session);
    } catch (error) {
      // A tool's own error is a result, not a throw: anything thrown here says the session may be unwell.
      failed = true;
      throw open.classify(error, what);
    } finally {
      this.release(entry, failed);
    }
  }

  private acquire(key: string, target: UpstreamTarget): Entry {
    let entry = this.entries.get(key);
    if (entry === undefined) {
      this.makeRoom();
      entry = { key, opening: openUpstream(this.http, target, this.limits.maxAnswerBytes), inUse: 0, retired: false, closed: false, idleTimer: null };
      const opened = entry;
      // A session the server or the network closed takes no further call.
      opened.opening.then(
        ({ session }) => {
          session.client.onclose = () => this.retire(opened);
        },
        () => this.retire(opened),
      );
      this.entries.set(key, entry);
    } else {
      // Most recently used last: Map keeps insertion order.
      this.entries.delete(key);
      this.entries.set(key, entry);
    }
    entry.inUse++;
    if (entry.idleTimer) clearTimeout(entry.idleTimer);
    entry.idleTimer = null;
    return entry;
  }

  private release(entry: Entry, failed: boolean): void {
    entry.inUse--;
    if (failed || entry.retired) {
      this.retire(entry);
      return;
    }
    if (entry.inUse === 0) {
      entry.idleTimer = setTimeout(() => this.retire(entry), this.limits.idleMs);
      entry.idleTimer.unref();
    }
  }

  private retire(entry: Entry): void {
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    entry.retired = true;
    if (entry.inUse === 0) void this.shut(entry);
  }

  /** Past the cap, the least recently used idle sessions go; busy ones are never cut off. */
  private makeRoom(): void {
    if (this.entries.size < this.limits.maxSessions) return;
    for (const entry of this.entries.values()) {
      if (this.entries.size < this.limits.maxSessions) return;
      if (entry.inUse === 0) this.retire(entry);
    }
  }

  private async shut(entry: Entry): Promise<void> {
    if (entry.closed) return;
    entry.closed = true;
    if (entry.idleTimer) clearTimeout(entry.idleTimer);
    entry.idleTimer = null;
    const open = await entry.opening.catch(() => null);
    await open?.close();
  }
}

/** What shapes a session; the credential only as a hash, so no secret sits in a map key. */
function sessionKey(target: UpstreamTarget): string {
  const credential = createHash('sha256')
    .update(JSON.stringify(Object.entries(target.headers).sort()))
    .digest('base64url');
  return [target.upstreamId ?? '', target.transport, target.url, target.timeoutMs, credential].join('\u0000');
}
