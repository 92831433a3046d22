import { open, readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';

/**
 * A bounded, read-only view of a checked-out repository: what the build decision reads, and nothing
 * more. Paths are relative POSIX paths inside the root (`''` is the root itself). A path that climbs
 * out (`..`, absolute) is refused, and so is a symlink whose target lies outside the root: a repo must
 * not make the service read `/etc/passwd` by committing `package.json -> /etc/passwd`. Such a link
 * reads as absent. Listings and reads are capped, since a repo is someone else's input.
 */
export interface TreeEntry {
  readonly name: string;
  readonly kind: 'file' | 'dir';
}

export interface SourceTreeLimits {
  /** Entries a listing returns at most (sorted by name; the rest are not seen). */
  readonly maxEntries: number;
  /** Bytes a file may have to be read; a larger one reads as `too_large`. */
  readonly maxFileBytes: number;
}

export const DEFAULT_TREE_LIMITS: SourceTreeLimits = { maxEntries: 2000, maxFileBytes: 256 * 1024 };

/** What reading a small file found. */
export type FileRead = { readonly kind: 'text'; readonly text: string } | { readonly kind: 'absent' } | { readonly kind: 'too_large'; readonly bytes: number };

/** Thrown for a path that names no place inside the tree (`..`, absolute, empty segments). */
export class PathOutsideTree extends Error {
  constructor(readonly requested: string) {
    super(`${JSON.stringify(requested)} is not a relative path inside the repository`);
    this.name = 'PathOutsideTree';
  }
}

/**
 * A relative path made canonical (`./a//b/` → `a/b`), or null when it names nothing inside a tree:
 * absolute (POSIX or Windows), or climbing with `..`.
 */
export function normalizeRelative(requested: string): string | null {
  if (requested.startsWith('/') || requested.startsWith('\\') || /^[A-Za-z]:/.test(requested)) return null;
  const segments = requested.split(/[/\\]/).filter((segment) => segment !== '' && segment !== '.');
  if (segments.some((segment) => segment === '..' || segment.includes('\0'))) return null;
  return segments.join('/');
}

export class SourceTree {
  private constructor(
    /** The root's real path (symlinks resolved), against which every target is checked. */
    private readonly realRoot: string,
    /** Where this view starts inside realRoot (`''`, or a subfolder for `subtree`). */
    private readonly base: string,
    readonly limits: SourceTreeLimits,
  ) {}

  /** A view of `directory` (which must exist and be a folder). */
  static async open(directory: string, limits: SourceTreeLimits = DEFAULT_TREE_LIMITS): Promise<SourceTree> {
    const real = await realpath(directory);
    if (!(await stat(real)).isDirectory()) throw new Error(`${directory} is not a directory`);
    return new SourceTree(real, '', limits);
  }

  /** The same tree seen from a subfolder (a `rootDir`): paths are then relative to it. */
  subtree(relative: string): SourceTree {
    const normal = this.relativeOrThrow(relative);
    return new SourceTree(this.realRoot, joinRelative(this.base, normal), this.limits);
  }

  /** Where this view starts, relative to the repository root (`''` for the root). */
  get rootDir(): string {
    return this.base;
  }

  /** Whether `relative` is a file or folder inside the tree (a link leaving the tree is not). */
  async exists(relative: string): Promise<boolean> {
    return (await this.kindOf(relative)) !== null;
  }

  async isDirectory(relative: string): Promise<boolean> {
    return (await this.kindOf(relative)) === 'dir';
  }

  async isFile(relative: string): Promise<boolean> {
    return (await this.kindOf(relative)) === 'file';
  }

  /** The entries of a folder, sorted by name, at most `maxEntries`; `[]` for anything not a folder. */
  async list(relative = ''): Promise<TreeEntry[]> {
    const target = await this.resolveInside(relative);
    if (target === null) return [];
    let names: string[];
    try {
      names = (await readdir(target)).sort();
    } catch {
      return [];
    }
    const dir = this.relativeOrThrow(relative);
    const entries: TreeEntry[] = [];
    for (const name of names.slice(0, this.limits.maxEntries)) {
      const kind = await this.kindOf(joinRelative(dir, name));
      if (kind !== null) entries.push({ name, kind });
    }
    return entries;
  }

  /** A small text file: its text, `absent` (or not a file, or a link leaving the tree), or `too_large`. */
  async read(relative: string): Promise<FileRead> {
    const target = await this.resolveInside(relative);
    if (target === null) return { kind: 'absent' };
    let handle: Awaited<ReturnType<typeof open>>;
    try {
      handle = await open(target, 'r');
    } catch {
      return { kind: 'absent' };
    }
    try {
      const info = await handle.stat();
      if (!info.isFile()) return { kind: 'absent' };
      if (info.size > this.limits.maxFileBytes) return { kind: 'too_large', bytes: info.size };
      // Read at most the cap plus one byte: a file growing between stat and read still cannot be read whole.
      const buffer = Buffer.alloc(this.limits.maxFileBytes + 1);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      if (bytesRead > this.limits.maxFileBytes) return { kind: 'too_large', bytes: bytesRead };
      return { kind: 'text', text: buffer.subarray(0, bytesRead).toString('utf8') };
    } finally {
      await handle.close();
    }
  }

  /** The text of a small file, or null when it is absent or too large to read. */
  async readText(relative: string): Promise<string | null> {
    const found = await this.read(relative);
    return found.kind === 'text' ? found.text : null;
  }

  private relativeOrThrow(relative: string): string {
    const normal = normalizeRelative(relative);
    if (normal === null) throw new PathOutsideTree(relative);
    return normal;
  }

  private async kindOf(relative: string): Promise<'file' | 'dir' | null> {
    const target = await this.resolveInside(relative);
    if (target === null) return null;
    try {
      const info = await stat(target);
      return info.isDirectory() ? 'dir' : info.isFile() ? 'file' : null;
    } catch {
      return null;
    }
  }

  /** The real path of `relative` when it exists and, links followed, stays inside the root; else null. */
  private async resolveInside(relative: string): Promise<string | null> {
    const full = path.join(this.realRoot, joinRelative(this.base, this.relativeOrThrow(relative)));
    let real: string;
    try {
      real = await realpath(full);
    } catch {
      return null; // absent, or a dangling link
    }
    return real === this.realRoot || real.startsWith(`${this.realRoot}${path.sep}`) ? real : null;
  }
}

function joinRelative(base: string, relative: string): string {
  if (base === '') return relative;
  if (relative === '') return base;
  return `${base}/${relative}`;
}
