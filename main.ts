import { resolve } from 'node:path';
import { loadConfig, ConfigError } from './config/load.ts';
import { isWorkerProcess, reportListening, runWorkerPrimary, unsharedStorage, workerCount } from './core/kernel/worker-processes.ts';

/** Starts the service: load config, build, listen, and drain in-flight work on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  // Files are the service's own: whatever is created without a stated mode (a library's, a temporary
  // file) is not readable by other users either. The data directory's files state theirs
  // (core/kernel/private-files.ts), so they stay private when the service is embedded or under another umask.
  process.umask(0o077);
  const config = loadConfig({ argv: process.argv.slice(2) });
  const workers = workerCount(config.server.workers);
  if (workers > 1 && !isWorkerProcess()) {
    const refusal = unsharedStorage(config.storage);
    if (refusal !== null) {
      throw new ConfigError(`config: server.workers: ${workers} processes cannot share this storage: ${refusal}`);
    }
    const log = (line: string) => process.stdout.write(`${JSON.stringify({ level: 30, time: Date.now(), pid: process.pid, msg: line })}\n`);
    process.exit(await runWorkerPrimary({ count: workers, shutdownGraceMs: config.server.shutdownGraceMs, log }));
  }
  // Imported here, not at the top: a cluster's primary serves nothing and needs none of it.
  const [{ buildApp }, { manifest }] = await Promise.all([import('./composition/build-app.ts'), import('./plugins/index.ts')]);
  const consoleDir = await consoleBuiltIfMissing(config.plugins);
  const app = await buildApp(config, { manifest });
  const { bootstrap } = app.svc;
  if (bootstrap?.ownerToken && config.bootstrap.printOwnerToken && !config.bootstrap.ownerToken) {
    // Shown once, on the start that created the organisation; it is stored only as a hash.
    process.stdout.write(
      `\nFirst start: created organisation "${config.bootstrap.organizationName}" and owner ${config.bootstrap.ownerEmail}.\n` +
        `Owner session token (shown once, keep it safe):\n\n  ${bootstrap.ownerToken}\n\n` +
        (consoleDir === null
          ? ''
          : // The token rides in the fragment, which browsers send to no server.
            `Or open the console and choose the owner's password (works once, for ${config.auth.passwordTokenTtlHours} hours):\n\n  ${consoleOrigin(config.server)}/console/set-password#token=${bootstrap.setPasswordToken}\n\n`),
    );
  }
  await app.listen({ host: config.server.host, port: config.server.port });
  reportListening();

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down: draining in-flight requests');
    const force = setTimeout(() => {
      app.log.warn('grace period over; exiting with requests still open');
      process.exit(1);
    }, config.server.shutdownGraceMs);
    force.unref();
    // close() ends connections idle at that moment; ones still answering become idle later and
    // would otherwise hold the process until their keep-alive timeout.
    const sweep = setInterval(() => app.server.closeIdleConnections(), 100);
    sweep.unref();
    app.close().then(
      () => process.exit(0),
      (error: unknown) => {
        app.log.error({ err: error }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // A worker whose primary is gone (killed) is no longer managed by anyone: it drains and leaves.
  if (isWorkerProcess()) process.on('disconnect', () => shutdown('primary gone'));
}

/** `npm start` builds the console when its build is missing (esbuild, well under a second); null when it is off. */
async function consoleBuiltIfMissing(plugins: Record<string, unknown>): Promise<string | null> {
  const { consoleSettings } = await import('./plugins/console/index.ts');
  const settings = consoleSettings(plugins);
  if (settings === null) return null;
  const { readConsoleManifest } = await import('./plugins/console/console-assets.ts');
  const dir = resolve(settings.dir);
  if ((await readConsoleManifest(dir)) === null) {
    const { bundleConsole } = await import('./tools/console-bundle.ts');
    await bundleConsole(dir);
  }
  return dir;
}

function consoleOrigin(server: { publicUrl?: string | undefined; host: string; port: number }): string {
  if (server.publicUrl) return server.publicUrl.replace(/\/+$/, '');
  const host = server.host === '0.0.0.0' || server.host === '::' ? '127.0.0.1' : server.host.includes(':') ? `[${server.host}]` : server.host;
  return `http://${host}:${server.port}`;
}

main().catch((error: unknown) => {
  if (error instanceof ConfigError) {
    process.stderr.write(`${error.message}\n`);
  } else {
    process.stderr.write(`failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  }
  process.exit(1);
});
