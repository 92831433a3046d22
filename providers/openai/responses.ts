import { estimatedUsage, type JsonObject, type ResponsesRequestBody, type ResponsesStreamEvent, type ResponsesUsage, type UpstreamError } from '../../core/gateway/provider.ts';
import { readSse } from '../http/sse-reader.ts';
import { errorFromInBand, kindForErrorType, protocolError, toUpstreamError, type ErrorContext } from '../http/upstream-errors.ts';
import { estimateOutputTokens, estimateResponsesInputTokens } from '../token-estimate.ts';
import { usageFromOpenAI } from './usage.ts';

/**
 * OpenAI's Responses API, served as it is. What the gateway needs from it is the bill: tokens from
 * the final response's `usage`, and the hosted web searches it ran, one per `web_search_call`
 * output item (OpenAI bills each call, whatever its action).
 */

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value);

/** The terminal events of a stream; `response.failed` and `error` end it too, as errors. */
const FINISHED_EVENTS = new Set(['response.completed', 'response.incomplete']);

export function countWebSearches(output: unknown): number {
  if (!Array.isArray(output)) return 0;
  return output.filter((item) => isObject(item) && item['type'] === 'web_search_call').length;
}

/** What the output items say for estimating tokens when the upstream reports none. */
function outputForEstimate(output: unknown) {
  let text = '';
  let reasoning = '';
  const toolCalls: Array<{ name: string; arguments: string }> = [];
  for (const item of Array.isArray(output) ? output : []) {
    if (!isObject(item)) continue;
    if (item['type'] === 'function_call') toolCalls.push({ name: String(item['name'] ?? ''), arguments: String(item['arguments'] ?? '') });
    else if (item['type'] === 'custom_tool_call') toolCalls.push({ name: String(item['name'] ?? ''), arguments: String(item['input'] ?? '') });
    const parts = item['type'] === 'reasoning' ? item['summary'] : item['content'];
    for (const part of Array.isArray(parts) ? parts : []) {
      if (!isObject(part) || typeof part['text'] !== 'string') continue;
      if (item['type'] === 'reasoning') reasoning += part['text'];
      else text += part['text'];
    }
  }
  return { text, reasoning, toolCalls };
}

/** The bill of a finished response object (the JSON answer, or the one a terminal stream event carries). */
export function responsesUsage(response: JsonObject, request: ResponsesRequestBody): ResponsesUsage {
  const tokens = usageFromOpenAI(response['usage']) ?? estimatedUsage(estimateResponsesInputTokens(request), estimateOutputTokens(outputForEstimate(response['output'])));
  return { tokens, webSearches: countWebSearches(response['output']) };
}

/** A response the upstream reports as failed (`status: failed`, its `error` saying why), as an error. */
export function failedResponseError(errors: ErrorContext, response: JsonObject): UpstreamError | null {
  const error = response['error'];
  if (response['status'] !== 'failed' && !isObject(error)) return null;
  const detail = isObject(error) ? error : {};
  return errorFromInBand(errors, kindForErrorType(detail['code'] ?? detail['type']), { error: detail });
}

/**
 * Responses SSE → every event in order, named as the upstream named it (its `event:` field, else
 * the payload's `type`), then the usage once. The stream ends at `response.completed` or
 * `response.incomplete`; `response.failed` and `error` events end it as an UpstreamError, and a
 * stream that stops before any of them is broken (a protocol error).
 */
export async function* openAIResponsesEvents(body: AsyncIterable<Uint8Array>, request: ResponsesRequestBody, errors: ErrorContext): AsyncGenerator<ResponsesStreamEvent> {
  let finalResponse: JsonObject | null = null;
  try {
    for await (const event of readSse(body)) {
      // keep reading after the terminal event so the body ends cleanly and the socket goes back to the pool
      if (finalResponse !== null || event.data === '[DONE]') continue;
      let data: unknown;
      try {
        data = JSON.parse(event.data);
      } catch {
        throw protocolError(errors, 'upstream sent a stream event that is not JSON', event.data.slice(0, 2000));
      }
      if (!isObject(data)) throw protocolError(errors, 'upstream sent a stream event that is not an object', data);
      const name = event.event ?? (typeof data['type'] === 'string' ? data['type'] : undefined);
      if (name === undefined) throw protocolError(errors, 'upstream sent a stream event without a type', data);
      if (name === 'error') throw errorFromInBand(errors, kindForErrorType(data['code'] ?? data['type']), { error: data });
      if (name === 'response.failed') {
        const response = isObject(data['response']) ? data['response'] : {};
        throw failedResponseError(errors, { ...response, status: 'failed' }) ?? protocolError(errors, 'upstream response failed', data);
      }
      if (FINISHED_EVENTS.has(name)) {
        if (!isObject(data['response'])) throw protocolError(errors, `upstream sent ${name} without its response`, data);
        finalResponse = data['response'];
      }
      yield { type: 'event', event: name, data };
    }
  } catch (error) {
    // a connection that drops after the terminal event lost nothing
    if (finalResponse === null) throw toUpstreamError(errors, error);
  }
  if (finalResponse === null) throw protocolError(errors, 'the stream ended before response.completed');
  yield { type: 'usage', usage: responsesUsage(finalResponse, request) };
}
