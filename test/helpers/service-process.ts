import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';

/** A port nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as { port: number }).port;
  server.close();
  return port;
}

/** The service (main.ts) running as its own process, as production runs it. */
export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  /** Process-log lines so far (pino JSON). */
  log: string[];
  /** From spawn to listening. */
  startMs: number;
}

/** Starts main.ts with this config and resolves once it listens (the log line, not a poll). */
export async function startServiceProcess(configPath: string, dataDir: string, ownerToken: string): Promise<ServiceProcess> {
  const port = await freePort();
  const spawnedAt = performance.now();
  const child = spawn(process.execPath, ['--import', 'tsx', 'main.ts'], {
    env: { ...process.env, SVC_CONFIG: configPath, PORT: String(port), SVC_OWNER_TOKEN: ownerToken, SVC_DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', LOG_LEVEL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const log: string[] = [];
  let pending = '';
  const listening = new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      pending += chunk.toString();
      const lines = pending.split('\n');
      pending = lines.pop()!;
      for (const line of lines) {
        log.push(line);
        if (line.includes('Server listening at')) resolve();
      }
    });
    child.stderr!.on('data', (chunk: Buffer) => log.push(chunk.toString()));
    child.once('exit', (code, signal) => reject(new Error(`the service exited (${code ?? signal}) before listening:\n${log.join('\n').slice(-2000)}`)));
  });
  await listening;
  return { child, url: `http://127.0.0.1:${port}`, log, startMs: Math.round(performance.now() - spawnedAt) };
}

/** Stops the process with `signal` (SIGKILL: a crash) and resolves with its exit code once it is gone. */
export async function stopServiceProcess(service: ServiceProcess, signal: NodeJS.Signals): Promise<number | null> {
  if (service.child.exitCode !== null || service.child.signalCode !== null) return service.child.exitCode;
  const exited = once(service.child, 'exit');
  service.child.kill(signal);
  const [code] = (await exited) as [number | null];
  return code;
}
