import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ClientGoneError } from '../../core/kernel/errors.ts';
import type { Admission, CallOutcome, InferenceAdmission } from '../../core/gateway/inference-admission.ts';
import type { GatewayMetrics } from '../../core/gateway/metrics.ts';
import { GatewayCallOptions } from '../../core/gateway/call-options.ts';
import { CallSignal } from '../../core/gateway/call-signal.ts';
import { estimatedUsage, UpstreamError, type ChatCompletionChunk, type ChatStreamEvent, type Usage } from '../../core/gateway/provider.ts';
import { chatInputTokenBound } from '../../providers/input-token-bound.ts';
import { chunkOutputBytes, estimateChatInputTokens, tokensFromUtf8Bytes } from '../../providers/token-estimate.ts';
import { toOpenAIUsage } from '../../providers/usage-format.ts';
import { carriesContent, parseChatRequest, upstreamChatBody, type ParsedChatRequest } from './chat-request.ts';
import type { CircuitBreaker } from './circuit-breaker.ts';
import { FailoverError, runWithFailover, type FailoverSettings } from './failover.ts';
import type { InferenceConfig } from './inference-config.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
import type { ProviderRegistry } from './provider-registry.ts';
import { planRoutes, type RouteCandidate } from './route-planner.ts';
import { SseResponse } from './sse-response.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

export interface ChatRouteDeps {
  catalogue: ModelCatalogue;
  providers: ProviderRegistry;
  breaker: CircuitBreaker;
  admission: InferenceAdmission;
  config: InferenceConfig;
  metrics: GatewayMetrics;
}

const ENDPOINT = '/v1/chat/completions';

/** Aborted when the client goes away before the response is complete. */
function clientSignal(reply: FastifyReply): CallSignal {
  const signal = new CallSignal();
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) signal.abort(new ClientGoneError());
  });
  return signal;
}

function estimateFor(request: ParsedChatRequest, model: CatalogueModel, inputTokens: number) {
  const asked = request.max_completion_tokens ?? request.max_tokens ?? model.maxOutputTokens;
  // Each of n choices may take max_tokens, and the upstream bills them all as output.
  const choices = typeof request['n'] === 'number' && request['n'] > 1 ? Math.ceil(request['n']) : 1;
  return {
    inputTokens,
    // An absurd n must still make an integer (the reservation is priced in BigInt).
    maxOutputTokens: Math.min(Math.min(asked, model.maxOutputTokens) * choices, Number.MAX_SAFE_INTEGER),
  };
}

function failureOutcome(error: unknown, started: number): CallOutcome {
  const gone = error instanceof ClientGoneError;
  return {
    status: gone ? 499 : error instanceof ApiError ? error.status : 500,
    errorCode: gone ? 'client_closed_request' : error instanceof ApiError ? error.code : 'internal_error',
    usage: null,
    provider: null,
    upstreamModel: null,
    attempts: error instanceof FailoverError ? error.attempts : 0,
    latencyMs: Math.round(performance.now() - started),
    ttftMs: null,
  };
}

/** Before anything reached the client: settle the call as failed, keep its rate-limit headers, rethrow for the error envelope. */
function failBeforeResponse(reply: FastifyReply, call: CallContext, error: unknown): never {
  call.admission.finish(failureOutcome(error, call.started));
  void reply.headers(call.admission.headers);
  throw error;
}

export function registerChatCompletionsRoute(app: FastifyInstance, deps: ChatRouteDeps): void {
  const settings: FailoverSettings = deps.config.failover;
  const onAttemptFailed = (candidate: RouteCandidate<'language'>, error: UpstreamError) => deps.metrics.upstreamError(candidate.provider.name, error.kind);

  app.post(ENDPOINT, { config: { auth: { scope: 'inference' }, surface: 'v1', browserRule: true } }, async (request, reply) => {
    const body = parseChatRequest(request.body);
    const credential = request.credential!;
    const model = deps.catalogue.require(credential, body.model);
    const stream = body.stream === true;
    const candidates = planRoutes(model, 'language', deps.providers, deps.breaker);
    // A number at once, unless a long text is being counted in slices (no promise on the usual call).
    const counting = chatInputTokenBound(body, model.inputProfile);
    const inputTokens = typeof counting === 'number' ? counting : await counting;
    // What a call cut off by a crash is billed for: the exact count where the tokenizer is known, else
    // the local estimate (the reservation's byte bound would bill several times the real input).
    const countedInputTokens = model.inputProfile.tokenizers.includes('bytes') ? estimateChatInputTokens(body as unknown as Parameters<typeof estimateChatInputTokens>[0]) : inputTokens;
    const admitted = await deps.admission.admit({
      credential,
      requestId: request.id,
      endpoint: ENDPOINT,
      model: model.id,
      stream,
      estimate: estimateFor(body, model, inputTokens),
      countedInputTokens,
    });
    const admission: Admission = {
      headers: admitted.headers,
      logBodies: admitted.logBodies,
      finish(outcome) {
        deps.metrics.observeCall(ENDPOINT, model.id, outcome, request);
        admitted.finish(outcome);
      },
    };
    const started = performance.now();
    const signal = clientSignal(reply);
    const call: CallContext = { deps, body, model, candidates, admission, countedInputTokens, started, signal, settings, onAttemptFailed };
    return stream ? streamCompletion(request, reply, call) : completeOnce(request, reply, call);
  });
}

interface CallContext {
  deps: ChatRouteDeps;
  body: ParsedChatRequest;
  model: CatalogueModel;
  candidates: RouteCandidate<'language'>[];
  admission: Admission;
  /** The input as counted locally: billed for a stream that breaks before its usage arrives. */
  countedInputTokens: number;
  started: number;
  signal: CallSignal;
  settings: FailoverSettings;
  onAttemptFailed(candidate: RouteCandidate<'language'>, error: UpstreamError): void;
}

async function completeOnce(request: FastifyRequest, reply: FastifyReply, call: CallContext) {
  const { deps, body, model, candidates, admission, started, signal, settings } = call;
  try {
    const outcome = await runWithFailover(
      candidates,
      (candidate, attemptSignal) => candidate.api.chat(upstreamChatBody(body, candidate.upstreamModel), new GatewayCallOptions(attemptSignal, request.id)),
      { settings, breaker: deps.breaker, signal, onAttemptFailed: call.onAttemptFailed },
    );
    const { completion, usage } = outcome.value;
    admission.finish({
      status: 200,
      errorCode: null,
      usage,
      provider: outcome.candidate.provider.name,
      upstreamModel: outcome.candidate.upstreamModel,
      attempts: outcome.attempts,
      latencyMs: Math.round(performance.now() - started),
      ttftMs: null,
      ...(admission.logBodies ? { bodies: { request: body, response: completion } } : {}),
    });
    void reply.headers(admission.headers).header('x-svc-provider', outcome.candidate.provider.name).header('x-svc-attempts', String(outcome.attempts));
    return reply.send({ ...completion, model: model.id, usage: completion.usage ?? toOpenAIUsage(usage) });
  } catch (error) {
    failBeforeResponse(reply, call, error);
  }
}

interface OpenedStream {
  iterator: AsyncIterator<ChatStreamEvent>;
  /** Events read before and including the first content chunk. */
  buffered: ChatStreamEvent[];
  firstContentAt: number;
}

/**
 * Opens a stream on one route and reads until the first content chunk (the commit point) or the
 * time-to-first-token limit. Until then nothing has reached the client, so a failure here can
 * still fail over to the next route.
 */
async function openUntilFirstContent(candidate: RouteCandidate<'language'>, call: CallContext, attemptSignal: CallSignal, requestId: string): Promise<OpenedStream> {
  const ttftMs = call.model.ttftTimeoutMs ?? call.deps.config.failover.ttftTimeoutMs;
  // Its own signal: a slow first token cuts this attempt without ending the client's call.
  const upstream = attemptSignal.child();
  let timer: NodeJS.Timeout | undefined;
  const ttft = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const late = new UpstreamError('timeout', `no content within ${ttftMs} ms`);
      upstream.signal.abort(late);
      reject(late);
    }, ttftMs);
  });
  const iterator = candidate.api.chatStream(upstreamChatBody(call.body, candidate.upstreamModel), new GatewayCallOptions(upstream.signal, requestId))[Symbol.asyncIterator]();
  const buffered: ChatStreamEvent[] = [];
  try {
    for (;;) {
      const pending = iterator.next();
      // If the timeout wins the race, the abandoned read rejects later: keep that quiet.
      pending.catch(() => undefined);
      const next = await Promise.race([pending, ttft]);
      if (next.done) throw new UpstreamError('protocol', 'the stream ended before any content');
      buffered.push(next.value);
      if (next.value.type === 'chunk' && carriesContent(next.value.chunk)) {
        return { iterator, buffered, firstContentAt: performance.now() };
      }
    }
  } catch (error) {
    upstream.signal.abort(error);
    void iterator.return?.().catch(() => undefined);
    throw error;
  } finally {
    clearTimeout(timer);
    upstream.detach();
  }
}

async function streamCompletion(request: FastifyRequest, reply: FastifyReply, call: CallContext) {
  const { deps, body, model, candidates, admission, started, signal, settings } = call;
  let opened: { value: OpenedStream; candidate: RouteCandidate<'language'>; attempts: number };
  try {
    opened = await runWithFailover(candidates, (candidate, attemptSignal) => openUntilFirstContent(candidate, call, attemptSignal, request.id), {
      settings,
      breaker: deps.breaker,
      signal,
      onAttemptFailed: call.onAttemptFailed,
    });
  } catch (error) {
    failBeforeResponse(reply, call, error);
  }

  const { iterator, buffered, firstContentAt } = opened.value;
  reply.hijack();
  const sse = new SseResponse(reply.raw);
  sse.open({
    ...(reply.getHeaders() as Record<string, string>),
    ...admission.headers,
    'x-svc-provider': opened.candidate.provider.name,
    'x-svc-attempts': String(opened.attempts),
  });

  const includeUsage = body.stream_options?.include_usage === true;
  let usage: Usage | null = null;
  let outputBytes = 0;
  let last: ChatCompletionChunk | null = null;
  let status = 200;
  let errorCode: string | null = null;
  // Only when the account keeps bodies: the streamed answer, reassembled.
  const transcript = admission.logBodies ? { content: '', toolCalls: [] as unknown[], finishReason: null as string | null } : null;

  const forward = async (event: ChatStreamEvent) => {
    if (event.type === 'usage') {
      usage = event.usage;
      return;
    }
    event.chunk.model = model.id;
    last = event.chunk;
    outputBytes += chunkOutputBytes(event.chunk);
    if (transcript) {
      for (const choice of event.chunk.choices) {
        if (typeof choice.delta.content === 'string') transcript.content += choice.delta.content;
        if (Array.isArray(choice.delta.tool_calls)) transcript.toolCalls.push(...choice.delta.tool_calls);
        transcript.finishReason = choice.finish_reason ?? transcript.finishReason;
      }
    }
    await sse.data(event.chunk);
  };

  try {
    for (const event of buffered) await forward(event);
    for (;;) {
      if (signal.aborted) throw new ClientGoneError();
      const next = await iterator.next();
      if (next.done) break;
      await forward(next.value);
    }
    if (includeUsage && usage) {
      const tail = last as ChatCompletionChunk | null;
      await sse.data({
        id: tail?.id ?? request.id,
        object: 'chat.completion.chunk',
        created: tail?.created ?? Math.floor(Date.now() / 1000),
        model: model.id,
        choices: [],
        usage: toOpenAIUsage(usage),
      });
    }
    await sse.data('[DONE]');
  } catch (error) {
    if (signal.aborted || error instanceof ClientGoneError) {
      status = 499;
      errorCode = 'client_closed_request';
    } else {
      // Past the commit point a failure can only be reported in-band.
      status = 502;
      errorCode = 'upstream_error';
      request.log.warn({ err: error, route: opened.candidate.key }, 'stream failed after first content');
      await sse.data(new ApiError('upstream_error', 'The upstream stream failed part-way; the response is incomplete. It is safe to retry.').toEnvelope());
    }
    void iterator.return?.().catch(() => undefined);
  } finally {
    sse.end();
    admission.finish({
      status,
      errorCode,
      // A stream that broke before its usage arrived: what was sent, counted locally.
      usage: usage ?? estimatedUsage(call.countedInputTokens, tokensFromUtf8Bytes(outputBytes)),
      provider: opened.candidate.provider.name,
      upstreamModel: opened.candidate.upstreamModel,
      attempts: opened.attempts,
      latencyMs: Math.round(performance.now() - started),
      ttftMs: Math.round(firstContentAt - started),
      ...(transcript ? { bodies: { request: body, response: transcript } } : {}),
    });
  }
  return reply;
}
