import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ChatCompletion, ChatStreamEvent, Usage } from '../../../core/gateway/provider.ts';
import { toApiError } from '../../../core/http/error-handler.ts';
import { ClientGoneError } from '../../../core/kernel/errors.ts';
import type { ParsedChatRequest } from '../chat-request.ts';
import { SseResponse } from '../sse-response.ts';
import { anthropicErrorBody } from './messages-errors.ts';
import { parseMessagesRequest } from './messages-request.ts';
import { toAnthropicMessage } from './messages-response.ts';
import { toAnthropicStream } from './messages-stream.ts';

export const MESSAGES_ENDPOINT = '/v1/messages';

/** One chat call as the route hands it to the gateway's call path. */
export interface ChatCall {
  request: FastifyRequest;
  reply: FastifyReply;
  /** Recorded in the request log and metrics as the endpoint called. */
  endpoint: string;
  /** The translated request; `model` is the public id the client named. */
  body: ParsedChatRequest;
}

/**
 * What this route needs from the gateway's call path (the one every /v1 route uses): resolving the
 * model for the key, admission (limits, money), failover, metering, the request log and the
 * client-disconnect abort all happen there, never here. Both methods throw an ApiError before
 * anything is answered; `headers` are the rate-limit and x-svc-* headers of the call.
 */
export interface ChatCallPath {
  complete(call: ChatCall): Promise<{ completion: ChatCompletion; usage: Usage; model: string; headers: Record<string, string> }>;
  /**
   * Resolves once the stream is past its commit point (failover happens before it). Its events
   * are the chat stream from there; an error they throw is a failure after the commit point, which
   * the call path records and this route reports in-band. `inputTokens` is the input as counted
   * at admission.
   */
  stream(call: ChatCall): Promise<{ events: AsyncIterable<ChatStreamEvent>; model: string; inputTokens: number; headers: Record<string, string> }>;
}

/** Every failure on this route, its auth and body parsing included, leaves in Anthropic's error shape. */
function sendAnthropicError(error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const failure = toApiError(error, request);
  for (const [name, value] of Object.entries(failure.headers)) void reply.header(name, value);
  return reply.code(failure.status).type('application/json; charset=utf-8').send(anthropicErrorBody(failure));
}

/**
 * `POST /v1/messages`: Anthropic's Messages API for any model of the catalogue, translated to and
 * from the gateway's chat request. The key comes as `x-api-key` (Anthropic's SDKs) or a bearer token.
 */
export function registerAnthropicMessagesRoute(app: FastifyInstance, callPath: ChatCallPath): void {
  app.post(MESSAGES_ENDPOINT, { config: { auth: { scope: 'inference', xApiKey: true }, surface: 'v1' }, errorHandler: sendAnthropicError }, async (request, reply) => {
    const { chat, stopSequences } = parseMessagesRequest(request.body);
    const call: ChatCall = { request, reply, endpoint: MESSAGES_ENDPOINT, body: chat };
    if (chat.stream !== true) {
      const { completion, usage, model, headers } = await callPath.complete(call);
      void reply.headers(headers);
      return reply.send(toAnthropicMessage(completion, usage, model, stopSequences));
    }

    const opened = await callPath.stream(call);
    reply.hijack();
    const sse = new SseResponse(reply.raw);
    sse.open({ ...(reply.getHeaders() as Record<string, string>), ...opened.headers });
    try {
      const events = toAnthropicStream(opened.events, { model: opened.model, stopSequences, inputTokens: opened.inputTokens });
      for await (const { event, data } of events) await sse.event(event, data);
    } catch (error) {
      // The client went away: nobody is left to tell, and the call path has recorded it.
      if (!(error instanceof ClientGoneError)) request.log.warn({ err: error }, 'anthropic messages stream failed');
    } finally {
      sse.end();
    }
    return reply;
  });
}
