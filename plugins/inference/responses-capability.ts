import type { MeteredUnits } from '../../core/gateway/inference-admission.ts';
import { estimatedUsage, offers, type JsonObject, type ResponsesResult, type ResponsesStreamEvent, type ResponsesUsage } from '../../core/gateway/provider.ts';
import type { Credential } from '../../core/identity/credential.ts';
import { ApiError } from '../../core/kernel/errors.ts';
import { responsesInputTokenBound } from '../../providers/input-token-bound.ts';
import { estimateResponsesInputTokens, tokensFromUtf8Bytes } from '../../providers/token-estimate.ts';
import type { CallEstimate, EventSink, GatewayCapability, StreamCall, StreamWriter } from './capability.ts';
import type { CatalogueModel, ModelCatalogue } from './model-catalogue.ts';
import type { ProviderRegistry } from './provider-registry.ts';
import { checkResponsesServable, checkResponsesTools, mapResponsesInputTexts, offersWebSearch, parseResponsesRequest, type ParsedResponsesRequest } from './responses-request.ts';
// Catalogues the codes this module answers with (core/kernel/error-catalogue.ts).
import './inference-errors.ts';

/**
 * The events that announce the response before it has any output. They are held back (with the
 * time-to-first-token limit running), so a route that fails before producing anything is still
 * replaced by the next one; the first other event (in practice `response.output_item.added`, be
 * it a message, a function call or a web search) is the commit point.
 */
const ANNOUNCEMENTS = new Set(['response.created', 'response.queued', 'response.in_progress']);

/** The events that carry the whole response object, whose `model` becomes ours. */
const CARRY_RESPONSE = /^response\.(?:created|queued|in_progress|completed|incomplete|failed)$/;
const FINISHED = new Set(['response.completed', 'response.incomplete']);

/**
 * `POST /v1/responses`: OpenAI's Responses API passed through to upstreams that serve it
 * (`ResponsesPassthrough`), JSON and SSE, with every event forwarded in order under its own name.
 * Billed on the final response's tokens plus each hosted web search at the model's rate.
 */
export function responsesCapability(catalogue: ModelCatalogue, providers: ProviderRegistry): GatewayCapability<'responses', ParsedResponsesRequest, ResponsesResult, ResponsesStreamEvent> {
  /** How many provider instances can serve the model's Responses calls. */
  const providersServing = (model: CatalogueModel) =>
    new Set(
      model.routes
        .map((route) => providers.get(route.provider))
        .filter((provider) => provider !== undefined && offers(provider, 'responses'))
        .map((provider) => provider!.name),
    ).size;
  const servesResponses = (model: CatalogueModel) => model.modalities.output.includes('text') && providersServing(model) > 0;

  return {
    endpoint: '/v1/responses',
    modality: 'responses',
    parse: parseResponsesRequest,
    modelOf: (body) => body.model,
    check(body, model, credential) {
      if (!servesResponses(model)) throw notServedDirectly(model, catalogue, credential, servesResponses);
      checkResponsesTools(body, model);
      checkResponsesServable(body, providersServing(model));
    },
    mapInputTexts: mapResponsesInputTexts,
    estimate(body, model) {
      const counting = responsesInputTokenBound(body, model.inputProfile);
      return typeof counting === 'number' ? responsesEstimate(body, model, counting) : counting.then((inputTokens) => responsesEstimate(body, model, inputTokens));
    },
    attempt: (candidate, body, options) => candidate.api.create({ ...body, model: candidate.upstreamModel }, options),
    answer: (result, _body, model) => ({ usage: result.usage.tokens, units: searchUnits(result.usage), body: { ...result.body, model: model.id } }),
    streaming: {
      wanted: (body) => body.stream === true,
      open: (candidate, body, options) => candidate.api.stream({ ...body, model: candidate.upstreamModel }, options),
      commits: (event) => event.type === 'event' && !ANNOUNCEMENTS.has(event.event),
      writer: (_body, model, call) => new ResponsesStreamWriter(model, call),
    },
  };
}

function responsesEstimate(body: ParsedResponsesRequest, model: CatalogueModel, inputTokens: number): CallEstimate {
  const asked = body.max_output_tokens ?? model.maxOutputTokens;
  const searches = offersWebSearch(body) ? model.builtinTools.webSearch?.reservePerCall : undefined;
  return {
    inputTokens,
    maxOutputTokens: Math.min(asked, model.maxOutputTokens),
    ...(searches ? { units: { webSearches: searches } } : {}),
    // What a call cut off by a crash is billed for: the exact count where the tokenizer is known, else the local estimate.
    countedInputTokens: model.inputProfile.tokenizers.includes('bytes') ? estimateResponsesInputTokens(body) : inputTokens,
  };
}

function searchUnits(usage: ResponsesUsage): MeteredUnits | undefined {
  return usage.webSearches > 0 ? { webSearches: usage.webSearches } : undefined;
}

function notServedDirectly(model: CatalogueModel, catalogue: ModelCatalogue, credential: Credential, serves: (model: CatalogueModel) => boolean): ApiError {
  const able = catalogue
    .visibleTo(credential)
    .filter(serves)
    .map((m) => m.id);
  const which = able.length > 0 ? `; models that can: ${able.join(', ')}` : '';
  return new ApiError(
    'unsupported_model',
    `The model ${JSON.stringify(model.id)} is not served by a provider offering the Responses API: call /v1/chat/completions with it instead${which}`,
    { param: 'model' },
  );
}

const isObject = (value: unknown): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value);

/** Forwards every event under its own name with our model id, and keeps what the stream is billed on. */
class ResponsesStreamWriter implements StreamWriter<ResponsesStreamEvent> {
  private usage: ResponsesUsage | null = null;
  private lastSequence = -1;
  /** Text and argument deltas sent, for a stream that breaks before its usage. */
  private outputBytes = 0;
  /** Web searches begun, by item id: billed even if the stream breaks before the final response. */
  private readonly searches = new Set<string>();
  private finalResponse: JsonObject | null = null;

  constructor(
    private readonly model: CatalogueModel,
    private readonly call: StreamCall,
  ) {}

  write(event: ResponsesStreamEvent, sink: EventSink): Promise<void> | undefined {
    if (event.type === 'usage') {
      this.usage = event.usage;
      return undefined;
    }
    let data = event.data;
    if (typeof data['sequence_number'] === 'number') this.lastSequence = data['sequence_number'];
    if (typeof data['delta'] === 'string') this.outputBytes += Buffer.byteLength(data['delta']);
    const item = data['item'];
    if (isObject(item) && item['type'] === 'web_search_call') this.searches.add(String(item['id'] ?? this.searches.size));
    if (CARRY_RESPONSE.test(event.event) && isObject(data['response'])) {
      data = { ...data, response: { ...data['response'], model: this.model.id } };
      if (FINISHED.has(event.event) && this.call.logBodies) this.finalResponse = data['response'] as JsonObject;
    }
    return sink.event(event.event, data);
  }

  async close(): Promise<void> {
    // The terminal event (response.completed or response.incomplete) was the last frame: Responses streams end there.
  }

  /** The Responses API's own in-band error event, numbered after the last event sent. */
  async fail(error: ApiError, sink: EventSink): Promise<void> {
    await sink.event('error', { type: 'error', code: error.code, message: error.message, param: error.param, sequence_number: this.lastSequence + 1 });
  }

  settle() {
    const usage = this.usage ?? { tokens: estimatedUsage(this.call.countedInputTokens, tokensFromUtf8Bytes(this.outputBytes)), webSearches: this.searches.size };
    const units = searchUnits(usage);
    return { usage: usage.tokens, ...(units ? { units } : {}), logged: this.finalResponse ?? undefined };
  }
}
