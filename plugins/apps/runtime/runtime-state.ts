import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { SealedSecret, SecretOwner } from '../../../core/ports/secrets.ts';
import type { SecretVault } from '../../../core/services/secret-vault.ts';
import type { DeployRequest } from './runtime-port.ts';

/**
 * What must survive the runtime's host: per service, what should run (the last healthy deploy and
 * whether it was stopped) and which process groups were started for it, so a new host restarts the
 * apps from their artifacts (never rebuilding) and kills what the dead host left behind.
 */
export interface ServiceRecord {
  serviceId: string;
  desired: 'running' | 'stopped';
  /** The last deploy that became healthy; null once retired. */
  current: DeployRequest | null;
  /** Process groups this host started and has not seen end: the orphans a restore must kill. */
  groups: ProcessGroupRecord[];
}

export interface ProcessGroupRecord {
  deploymentId: string;
  pgid: number;
  /** The leader's start time in clock ticks since boot (/proc/PID/stat field 22): a reused pid is not ours. */
  startTicks: number | null;
}

/** The apps plugin will back this with its table; the file below serves until then, and in tests. */
export interface RuntimeState {
  load(): Promise<ServiceRecord[]>;
  save(record: ServiceRecord): Promise<void>;
  remove(serviceId: string): Promise<void>;
}

/** What seals the file's env values: the secret vault's keys and cipher (core/services/secret-vault.ts). */
export type StateSealer = Pick<SecretVault, 'sealDetached' | 'openDetached'>;

/** A sealed value as JSON holds it: the key's id and the cipher's parts in base64. */
interface SealedJson {
  keyId: string;
  nonce: string;
  ciphertext: string;
  authTag: string;
}

type StoredRequest = Omit<DeployRequest, 'env'> & { sealedEnv: SealedJson };
type StoredRecord = Omit<ServiceRecord, 'current'> & { current: StoredRequest | null };

/** The file since its values are sealed; a bare array is the older, plaintext one (read once, then rewritten). */
interface StoredFile {
  format: 'sealed-env/v1';
  records: StoredRecord[];
}

const OWNER_KIND = 'apps.runtime_state';
/**
 * The env is bound to its service (the owner) and deployment (the name): a sealed env copied
 * elsewhere opens nowhere.
 */
const envOwner = (serviceId: string): SecretOwner => ({ kind: OWNER_KIND, id: serviceId });
const envName = (deploymentId: string): string => `env@${deploymentId}`;

/**
 * One JSON file, rewritten whole through a rename so a crash mid-write leaves the previous one.
 * Each record's env (the app's variables, SVC_API_KEY among them) is sealed with the vault's
 * current key at every write; the rest (ids, folder, command, process groups) is no secret. The
 * file is read without the database, at boot: a record sealed under an older key on the ring opens
 * and is sealed again under the current one at the next write (restoreAll writes every record), so
 * a rotation strands nothing as long as the older key stays on the ring until the service restarted.
 */
export class FileRuntimeState implements RuntimeState {
  private readonly file: string;
  private records: Map<string, ServiceRecord> | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    dir: string,
    private readonly options: { sealer: StateSealer; warn?: (message: string) => void },
  ) {
    this.file = path.join(dir, 'runtime-state.json');
  }

  async load(): Promise<ServiceRecord[]> {
    return [...(await this.all()).values()].map((record) => structuredClone(record));
  }

  async save(record: ServiceRecord): Promise<void> {
    (await this.all()).set(record.serviceId, structuredClone(record));
    await this.flush();
  }

  async remove(serviceId: string): Promise<void> {
    (await this.all()).delete(serviceId);
    await this.flush();
  }

  private async all(): Promise<Map<string, ServiceRecord>> {
    if (this.records) return this.records;
    let parsed: ServiceRecord[] = [];
    try {
      parsed = this.opened(JSON.parse(await readFile(this.file, 'utf8')) as StoredFile | ServiceRecord[]);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    this.records ??= new Map(parsed.map((record) => [record.serviceId, record]));
    return this.records;
  }

  private opened(stored: StoredFile | ServiceRecord[]): ServiceRecord[] {
    // The plaintext file of earlier versions: taken as it is; the next write seals it.
    if (Array.isArray(stored)) return stored;
    return stored.records.map((record) => {
      if (record.current === null) return { ...record, current: null };
      const { sealedEnv, ...request } = record.current;
      try {
        const sealed: SealedSecret = {
          keyId: sealedEnv.keyId,
          nonce: Buffer.from(sealedEnv.nonce, 'base64'),
          ciphertext: Buffer.from(sealedEnv.ciphertext, 'base64'),
          authTag: Buffer.from(sealedEnv.authTag, 'base64'),
        };
        const owner = envOwner(record.serviceId);
        const opened = this.options.sealer.openDetached(owner, envName(request.deploymentId), sealed);
        const env = JSON.parse(opened.reveal()) as Record<string, string>;
        return { ...record, current: { ...request, env } };
      } catch (error) {
        // A key dropped from the ring too early, or an altered file: that service cannot be restarted
        // from here (a deploy starts it again); the others still are, and its orphans are still killed.
        const reason = error instanceof Error ? error.message : String(error);
        const message = `its recorded deploy cannot be opened (${reason}); deploy it again to run it`;
        this.options.warn?.(`service ${record.serviceId}: ${message}`);
        return { ...record, current: null };
      }
    });
  }

  private sealed(record: ServiceRecord): StoredRecord {
    if (record.current === null) return { ...record, current: null };
    const { env, ...request } = record.current;
    const owner = envOwner(record.serviceId);
    const sealed = this.options.sealer.sealDetached(owner, envName(request.deploymentId), JSON.stringify(env));
    const sealedEnv: SealedJson = {
      keyId: sealed.keyId,
      nonce: sealed.nonce.toString('base64'),
      ciphertext: sealed.ciphertext.toString('base64'),
      authTag: sealed.authTag.toString('base64'),
    };
    return { ...record, current: { ...request, sealedEnv } };
  }

  /** Writes are serialised: two saves racing must not let the older snapshot land last. */
  private flush(): Promise<void> {
    const records = [...this.records!.values()].map((record) => this.sealed(record));
    const stored: StoredFile = { format: 'sealed-env/v1', records };
    const snapshot = JSON.stringify(stored, null, 1);
    this.writing = this.writing.then(async () => {
      await mkdir(path.dirname(this.file), { recursive: true });
      const temporary = `${this.file}.${process.pid}.tmp`;
      await writeFile(temporary, snapshot, { mode: 0o600 });
      await rename(temporary, this.file);
    });
    return this.writing;
  }
}

/**
 * The keys the file's records are sealed under, read without opening any (none for a missing file,
 * or one of an earlier version): the keys a rotation must keep until the runtime has sealed the
 * records again, which it does when it next starts.
 */
export async function stateFileKeyIds(dir: string): Promise<string[]> {
  let stored: StoredFile | ServiceRecord[];
  try {
    stored = JSON.parse(await readFile(path.join(dir, 'runtime-state.json'), 'utf8')) as StoredFile | ServiceRecord[];
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  if (Array.isArray(stored)) return [];
  return [...new Set(stored.records.flatMap((record) => (record.current ? [record.current.sealedEnv.keyId] : [])))];
}
