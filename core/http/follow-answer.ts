import type { FastifyReply } from 'fastify';
import type { FollowEvent } from '../operations/operations.ts';
import { SseResponse } from './sse-response.ts';

/** How often a quiet stream sends a comment line, so proxies keep the connection open. */
const KEEPALIVE_MS = 15_000;

/**
 * A followed answer (core/operations/operations.ts `follow`) as server-sent events: `snapshot`
 * with the JSON answer, then each event the stream yields, then `end`. The stream is told to stop
 * (its signal aborts) when the client goes away.
 */
export async function sendFollowed(reply: FastifyReply, snapshot: unknown, open: (signal: AbortSignal) => AsyncIterable<FollowEvent>): Promise<FastifyReply> {
  const controller = new AbortController();
  reply.raw.once('close', () => controller.abort());
  const headers: Record<string, string | number | string[] | undefined> = {};
  for (const [name, value] of Object.entries(reply.getHeaders())) headers[name] = value as string | number | string[] | undefined;
  reply.hijack();
  const sse = new SseResponse(reply.raw);
  sse.open(headers);
  const keepalive = setInterval(() => {
    if (!sse.clientGone) reply.raw.write(': keepalive\n\n');
  }, KEEPALIVE_MS);
  keepalive.unref();
  try {
    await sse.event('snapshot', snapshot);
    for await (const item of open(controller.signal)) {
      if (sse.clientGone) break;
      await sse.event(item.event, item.data);
    }
    await sse.event('end', {});
  } catch (error) {
    await sse.event('error', { error: { message: error instanceof Error ? error.message : String(error), type: 'api_error', code: 'stream_failed', param: null } });
  } finally {
    clearInterval(keepalive);
    controller.abort();
    sse.end();
  }
  return reply;
}
