import { constants } from 'node:fs';
import { access } from 'node:fs/promises';
import path from 'node:path';
import type { Runtime } from './types.ts';

/**
 * Which runtimes this machine can run apps with: those whose interpreter or toolchain is an
 * executable on PATH. `static` needs none. The decision takes the list as an argument, so tests say
 * what is installed instead of depending on the machine they run on.
 */
const BINARIES: Record<Exclude<Runtime, 'static'>, readonly string[]> = {
  node: ['node'],
  bun: ['bun'],
  python: ['python3', 'python'],
  go: ['go'],
};

export async function runtimesOnPath(searchPath: string = process.env['PATH'] ?? ''): Promise<Runtime[]> {
  const folders = searchPath.split(path.delimiter).filter((folder) => folder !== '');
  const available: Runtime[] = [];
  for (const [runtime, names] of Object.entries(BINARIES) as Array<[Runtime, readonly string[]]>) {
    if (await anyExecutable(folders, names)) available.push(runtime);
  }
  return [...available, 'static'];
}

/** The binary a runtime needs, for messages. */
export function binaryOf(runtime: Runtime): string | null {
  return runtime === 'static' ? null : BINARIES[runtime][0]!;
}

async function anyExecutable(folders: string[], names: readonly string[]): Promise<boolean> {
  for (const folder of folders) {
    for (const name of names) {
      try {
        await access(path.join(folder, name), constants.X_OK);
        return true;
      } catch {}
    }
  }
  return false;
}
