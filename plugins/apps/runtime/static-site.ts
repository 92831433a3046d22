import { copyFile, cp, lstat, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A static site's artifact, self-contained so any runtime runs it the same way (a local sandbox,
 * a pod that fetched it): the served folder as `site/`, the static file server beside it (outside
 * the folder it serves), and a start command that runs the server with the system's node.
 *
 *   <artifact>/static-server.mjs
 *   <artifact>/site/index.html …
 */
export const STATIC_SERVER = fileURLToPath(new URL('./static-server.mjs', import.meta.url));
const SITE = 'site';

/** Why a static artifact cannot be made: the build left nothing to serve where the decision said. */
export class StaticSiteMissing extends Error {}

export interface StaticSiteOptions {
  /** The folder to serve, as the build left it. */
  servedDir: string;
  /** How the folder is named to the person deploying (`dist` below the app's folder). */
  label: string;
  artifactDir: string;
  /**
   * Where the server listens: 127.0.0.1 on this machine (the proxy reaches it there; nothing else
   * should), 0.0.0.0 in a pod (its Service reaches it on the pod's address).
   */
  host: '127.0.0.1' | '0.0.0.0';
}

/** Copies the folder and the server into `artifactDir` (made here); answers the start command. */
export async function assembleStaticSite(options: StaticSiteOptions): Promise<string> {
  const info = await lstat(options.servedDir).catch(() => null);
  // A symlink is refused too: what it points to is not the build's.
  if (info === null || !info.isDirectory()) {
    const fix = `the decision serves ${options.label}/; build into it, or give a start command`;
    throw new StaticSiteMissing(`there is no ${options.label}/ folder to serve after the build: ${fix}`);
  }
  const site = path.join(options.artifactDir, SITE);
  await mkdir(options.artifactDir, { recursive: true });
  const filter = (from: string) => path.basename(from) !== '.git';
  await cp(options.servedDir, site, { recursive: true, verbatimSymlinks: true, filter });
  await copyFile(STATIC_SERVER, path.join(options.artifactDir, 'static-server.mjs'));
  return staticStartCommand(site, options.host);
}

/** The server's command; the fallbacks are the files the site holds at its top (README.md, "Static sites"). */
async function staticStartCommand(site: string, host: string): Promise<string> {
  const isFile = async (name: string) => (await lstat(path.join(site, name)).catch(() => null))?.isFile() === true;
  const args = ['exec node static-server.mjs', `--root ${SITE}`, `--host ${host}`];
  if (await isFile('200.html')) args.push('--spa 200.html');
  if (await isFile('404.html')) args.push('--not-found 404.html');
  return args.join(' ');
}
