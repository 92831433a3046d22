import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
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

/** One JSON file, rewritten whole through a rename so a crash mid-write leaves the previous one. */
export class FileRuntimeState implements RuntimeState {
  private readonly file: string;
  private records: Map<string, ServiceRecord> | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(dir: string) {
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
      parsed = JSON.parse(await readFile(this.file, 'utf8')) as ServiceRecord[];
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    }
    this.records ??= new Map(parsed.map((record) => [record.serviceId, record]));
    return this.records;
  }

  /** Writes are serialised: two saves racing must not let the older snapshot land last. */
  private flush(): Promise<void> {
    const snapshot = JSON.stringify([...this.records!.values()], null, 1);
    this.writing = this.writing.then(async () => {
      await mkdir(path.dirname(this.file), { recursive: true });
      const temporary = `${this.file}.${process.pid}.tmp`;
      await writeFile(temporary, snapshot);
      await rename(temporary, this.file);
    });
    return this.writing;
  }
}
