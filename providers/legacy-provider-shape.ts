import type {
  CallOptions,
  ChatRequestBody,
  ChatResult,
  ChatStreamEvent,
  EmbeddingProvider,
  EmbeddingsRequestBody,
  EmbeddingsResult,
  LanguageModelProvider,
  Modality,
  Provider,
  ProviderType,
} from '../core/gateway/provider.ts';
import { MODALITIES } from '../core/gateway/provider.ts';

/**
 * The provider shape before modalities: a `capabilities` set naming what it does, and optional
 * `chat`, `chatStream` and `embeddings` methods on the provider itself. Third-party packages
 * written against it keep loading through adaptLegacyProvider.
 */
export interface LegacyProvider {
  readonly name: string;
  readonly capabilities: { has(capability: string): boolean };
  chat?(body: ChatRequestBody, options: CallOptions): Promise<ChatResult>;
  chatStream?(body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent>;
  embeddings?(body: EmbeddingsRequestBody, options: CallOptions): Promise<EmbeddingsResult>;
  close?(): Promise<void>;
}

/** Where loading says a package still uses the old shape (the kernel's logger fits). */
export interface DeprecationLog {
  warn(fields: Record<string, unknown>, message: string): void;
}

/**
 * A package's provider type whose providers are adapted when they come in the old shape, with
 * one deprecation line per provider instance.
 */
export function adaptingLegacyProviders<C>(type: ProviderType<C>, packageName: string, log?: DeprecationLog): ProviderType<C> {
  return {
    type: type.type,
    configSchema: type.configSchema,
    create(name, config, context) {
      const created: unknown = type.create(name, config, context);
      if (!isLegacyProvider(created)) return created as Provider;
      log?.warn(
        { provider: name, package: packageName },
        `provider "${name}" (package ${packageName}) uses the deprecated provider shape (capabilities with chat/chatStream/embeddings); it still works through an adapter, but should offer its modalities as members (language, embeddings, …; see the README's provider guide)`,
      );
      return adaptLegacyProvider(created);
    },
  };
}

/** Old shape: a capability set and no modality member. */
export function isLegacyProvider(value: unknown): value is LegacyProvider {
  if (value === null || typeof value !== 'object') return false;
  const candidate = value as Record<string, unknown>;
  const capabilities = candidate['capabilities'] as { has?: unknown } | null | undefined;
  return typeof capabilities?.has === 'function' && !MODALITIES.some((modality: Modality) => candidate[modality] !== undefined);
}

/**
 * The same provider in the modality shape. Language is offered when the old one could chat; one
 * that could not stream streams its whole answer as one chunk, which the gateway's commit point
 * handles like any stream.
 */
export function adaptLegacyProvider(legacy: LegacyProvider): Provider {
  const adapted: { -readonly [K in keyof Provider]: Provider[K] } = { name: legacy.name };
  const chat = legacy.capabilities.has('chat') && typeof legacy.chat === 'function' ? legacy.chat.bind(legacy) : undefined;
  if (chat) {
    const chatStream = legacy.capabilities.has('stream') && typeof legacy.chatStream === 'function' ? legacy.chatStream.bind(legacy) : undefined;
    const language: LanguageModelProvider = { chat, chatStream: chatStream ?? ((body, options) => streamedAtOnce(chat, body, options)) };
    adapted.language = language;
  }
  if (legacy.capabilities.has('embeddings') && typeof legacy.embeddings === 'function') {
    const embed = legacy.embeddings.bind(legacy);
    const embeddings: EmbeddingProvider = { embed };
    adapted.embeddings = embeddings;
  }
  if (typeof legacy.close === 'function') adapted.close = legacy.close.bind(legacy);
  return adapted;
}

async function* streamedAtOnce(chat: LanguageModelProvider['chat'], body: ChatRequestBody, options: CallOptions): AsyncIterable<ChatStreamEvent> {
  const { completion, usage } = await chat(body, options);
  const { id, created, model } = completion;
  yield {
    type: 'chunk',
    chunk: {
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: completion.choices.map((choice) => ({ index: choice.index, delta: { ...choice.message }, finish_reason: choice.finish_reason })),
    },
  };
  yield { type: 'usage', usage };
}
