import { NodeFS } from '@electric-sql/pglite/nodefs';
import { SHARED_BITS } from '../../core/kernel/private-files.ts';

type InitArguments = Parameters<NodeFS['init']>;

/** The members of Emscripten's NODEFS through which a mode reaches a real file. */
interface EmscriptenNodeFs {
  node_ops: {
    mknod(parent: unknown, name: string, mode: number, dev: number): unknown;
    setattr(node: unknown, attr: { mode?: number }): void;
  };
  stream_ops: { setattr(stream: unknown, attr: { mode?: number }): void };
}

/**
 * PGlite's on-disk file system with the database's files private to this user. Emscripten creates
 * each file, then chmods it to the mode asked for inside the WebAssembly module, mostly 0666
 * (PostgreSQL's own umask lives in that module, not in Node's process), so neither Node's umask nor
 * the data directory's mode keeps them private. Every mode NODEFS hands to the real file system
 * loses its group and other bits here, before the first file is created.
 */
export class PrivateNodeFS extends NodeFS {
  override async init(pg: InitArguments[0], options: InitArguments[1]): ReturnType<NodeFS['init']> {
    const { emscriptenOpts } = await super.init(pg, options);
    const keepPrivate = (module: object) => withoutSharedBits((module as { NODEFS: EmscriptenNodeFs }).NODEFS);
    return { emscriptenOpts: { ...emscriptenOpts, preRun: [...(emscriptenOpts.preRun ?? []), keepPrivate] } };
  }
}

function withoutSharedBits(nodefs: EmscriptenNodeFs): void {
  const { node_ops: nodeOps, stream_ops: streamOps } = nodefs;
  const mknod = nodeOps.mknod;
  const setattr = nodeOps.setattr;
  const setStreamAttr = streamOps.setattr;
  const narrowed = <A extends { mode?: number }>(attr: A): A => {
    if (attr.mode === undefined) return attr;
    return { ...attr, mode: attr.mode & ~SHARED_BITS };
  };
  nodeOps.mknod = (parent, name, mode, dev) => mknod.call(nodeOps, parent, name, mode & ~SHARED_BITS, dev);
  nodeOps.setattr = (node, attr) => setattr.call(nodeOps, node, narrowed(attr));
  streamOps.setattr = (stream, attr) => setStreamAttr.call(streamOps, stream, narrowed(attr));
}
