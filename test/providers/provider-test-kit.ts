import { UpstreamError, type CallOptions, type ChatCompletionChunk, type ChatStreamEvent } from '../../core/gateway/provider.ts';

/** Shared by the provider tests (not a test file itself). */

export const callOptions = (signal: AbortSignal = new AbortController().signal): CallOptions => ({ signal, requestId: 'req-123' });

export async function collect(stream: AsyncIterable<ChatStreamEvent>): Promise<ChatStreamEvent[]> {
  const events: ChatStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

export const chunksOf = (events: ChatStreamEvent[]): ChatCompletionChunk[] => events.flatMap((event) => (event.type === 'chunk' ? [event.chunk] : []));

/** The UpstreamError a call fails with; anything else (or success) fails the test. */
export async function failure(run: () => Promise<unknown>): Promise<UpstreamError> {
  try {
    await run();
  } catch (error) {
    if (error instanceof UpstreamError) return error;
    throw error;
  }
  throw new Error('expected the call to fail');
}
