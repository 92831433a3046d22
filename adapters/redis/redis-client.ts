import { createClient } from 'redis';

/** How long startup (or the first subscribe) waits for Redis before failing instead of retrying forever. */
const CONNECT_TIMEOUT_MS = 5_000;
/** How long close() lets pending commands drain before cutting the socket. */
const CLOSE_TIMEOUT_MS = 2_000;

export function makeClient(url: string) {
  return createClient({
    url,
    // Admission control must answer now: while Redis is unreachable a command fails at once
    // (the caller decides to fail open or closed) instead of queueing until the 5 s timeout.
    disableOfflineQueue: true,
  });
}

export type RedisClient = ReturnType<typeof makeClient>;

/**
 * node-redis emits 'error' on every failed (re)connect attempt and an 'error' without a listener
 * kills the process. Report the first error of each outage to stderr; the client keeps retrying.
 */
export function reportErrors(client: RedisClient, role: string): void {
  let reported = false;
  client.on('error', (err: unknown) => {
    if (reported) return;
    reported = true;
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`[coordination:redis] ${role} connection error (quiet until it reconnects): ${message}\n`);
  });
  client.on('ready', () => {
    reported = false;
  });
}

/** connect() retries forever when the server is down; startup should fail instead. */
export async function connectWithin(client: RedisClient, role: string): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Redis ${role} connection not ready within ${CONNECT_TIMEOUT_MS} ms`)), CONNECT_TIMEOUT_MS);
  });
  try {
    await Promise.race([client.connect(), deadline]);
  } catch (err) {
    client.destroy();
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

/** Graceful close (QUIT semantics: pending replies are awaited), bounded so shutdown never hangs. */
export async function closeClient(client: RedisClient): Promise<void> {
  if (!client.isOpen) {
    client.destroy();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), CLOSE_TIMEOUT_MS);
  });
  const closed = client.close().then(
    () => true,
    () => false,
  );
  const clean = await Promise.race([closed, gaveUp]);
  clearTimeout(timer);
  if (!clean) client.destroy();
}
