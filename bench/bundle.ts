import { build as esbuild } from 'esbuild';

/**
 * Compiles a bench child as `npm run build` compiles the service: one entry file, and a chunk for each
 * module imported on use (so a driver the config does not choose is never loaded), to run with plain node.
 * Answers the emitted entry's path.
 */
export async function bundleForNode(entryPoint: string, outdir: string): Promise<string> {
  await esbuild({
    entryPoints: [entryPoint],
    outdir,
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    logLevel: 'warning',
  });
  return `${outdir}/${entryPoint.split('/').pop()!.replace(/\.ts$/, '.mjs')}`;
}
