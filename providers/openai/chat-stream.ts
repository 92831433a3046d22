import { estimatedUsage, type ChatCompletionChunk, type ChatRequestBody, type ChatStreamEvent, type Usage } from '../../core/gateway/provider.ts';
import { readSse } from '../http/sse-reader.ts';
import { errorFromInBand, kindForErrorType, protocolError, toUpstreamError, type ErrorContext } from '../http/upstream-errors.ts';
import { chunkOutputBytes, estimateChatInputTokens, tokensFromUtf8Bytes } from '../token-estimate.ts';
import { usageFromOpenAI } from './usage.ts';

type RawChunk = Partial<ChatCompletionChunk> & { error?: unknown; usage?: unknown };

/**
 * OpenAI SSE → chunks, then usage once. The usage chunk arrives after the finish chunk, so the
 * stream is read to `[DONE]`. Chunks are passed on without `usage`: the gateway writes its own
 * usage chunk from the usage event, the same way for every provider.
 */
export async function* openAIChatEvents(body: AsyncIterable<Uint8Array>, request: ChatRequestBody, errors: ErrorContext): AsyncGenerator<ChatStreamEvent> {
  let usage: Usage | null = null;
  let finished = false;
  let done = false;
  let bytesOut = 0;

  try {
    for await (const event of readSse(body)) {
      // keep reading after [DONE] so the body ends cleanly and the socket goes back to the pool
      if (done) continue;
      if (event.data === '[DONE]') {
        done = true;
        continue;
      }
      let chunk: RawChunk;
      try {
        chunk = JSON.parse(event.data) as RawChunk;
      } catch {
        throw protocolError(errors, 'upstream sent a stream event that is not JSON', event.data.slice(0, 2000));
      }
      if (event.event === 'error' || (chunk.error !== undefined && chunk.error !== null)) {
        const detail = (chunk.error ?? chunk) as { type?: unknown; code?: unknown };
        throw errorFromInBand(errors, kindForErrorType(detail.code ?? detail.type), chunk);
      }
      if (chunk.usage !== undefined) {
        usage = usageFromOpenAI(chunk.usage) ?? usage;
        delete chunk.usage;
      }
      const choices = chunk.choices;
      if (!Array.isArray(choices) || choices.length === 0) continue;
      for (const choice of choices) if (choice.finish_reason) finished = true;
      bytesOut += chunkOutputBytes({ choices });
      yield { type: 'chunk', chunk: chunk as ChatCompletionChunk };
    }
  } catch (error) {
    // a connection that drops after [DONE] lost nothing
    if (!done) throw toUpstreamError(errors, error);
  }
  if (!done && !finished) throw protocolError(errors, 'the stream ended before a finish_reason or [DONE]');

  yield {
    type: 'usage',
    usage: usage ?? estimatedUsage(estimateChatInputTokens(request), tokensFromUtf8Bytes(bytesOut)),
  };
}
