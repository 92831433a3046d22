import type { RouteInputFacts } from '../../core/gateway/provider.ts';

/**
 * What an OpenAI model name says about how OpenAI's API counts its input: the tokenizer, and the
 * most one image in a prompt can count. Only names OpenAI's own API serves are recognised; a name
 * not recognised says nothing (undefined), and the caller must then assume the worst.
 */
export interface OpenAIInputFacts extends RouteInputFacts {
  tokenizer: 'o200k_base' | 'cl100k_base';
}

const OPENAI_API_HOST = 'api.openai.com';

/**
 * The `openai` type's default: what the upstream model name says, on OpenAI's own API only. Names
 * are trusted only there: an Azure deployment is named by its operator, and other
 * OpenAI-compatible servers (vLLM, Ollama, Groq…) name their models as they please, so there the
 * tokenizer is unknown unless the model declares one.
 */
export function openAIPlatformInputFacts(upstreamModel: string, settings: Readonly<Record<string, unknown>>): OpenAIInputFacts | undefined {
  return isOpenAIPlatform(settings) ? openAIInputFacts(upstreamModel) : undefined;
}

function isOpenAIPlatform(settings: Readonly<Record<string, unknown>>): boolean {
  if (settings['azure'] !== undefined) return false;
  try {
    return new URL(String(settings['baseUrl'])).hostname === OPENAI_API_HOST;
  } catch {
    return false;
  }
}

/**
 * OpenAI's image costs ("Images and vision", calculating costs): tile models count at most
 * 85 + 170 × 8 tiles = 1,445 (an image is fitted into 2048 × 2048, then its short side into 768,
 * so 2 × 4 tiles of 512 at most); patch models (gpt-4.1-mini/nano, o4-mini, gpt-5-mini/nano)
 * count at most 1,536 patches × 2.46, the largest multiplier (nano's): 3,779.
 */
const OPENAI_IMAGE_TOKENS = 3_779;
/** gpt-4o-mini prices images like gpt-4o but in tokens 33 times cheaper: 2,833 + 5,667 × 8 tiles. */
const GPT_4O_MINI_IMAGE_TOKENS = 2_833 + 5_667 * 8;
/** The largest of the above: for a model known to be OpenAI's without knowing which one. */
export const OPENAI_MAX_IMAGE_TOKENS = GPT_4O_MINI_IMAGE_TOKENS;

// Fine-tuned models are `ft:<base model>:<org>:…`; dated snapshots add `-YYYY-MM-DD`.
const O200K_FAMILIES = /^(?:ft:)?(?:gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|o1|o3|o4)(?=$|[-.:])/;
const CL100K_FAMILIES = /^(?:ft:)?(?:gpt-4|gpt-3\.5-turbo)(?=$|[-:])/;
const GPT_4O_MINI = /^(?:ft:)?gpt-4o-mini(?=$|[-:])/;

export function openAIInputFacts(upstreamModel: string): OpenAIInputFacts | undefined {
  if (O200K_FAMILIES.test(upstreamModel)) {
    return { tokenizer: 'o200k_base', maxImageTokens: GPT_4O_MINI.test(upstreamModel) ? GPT_4O_MINI_IMAGE_TOKENS : OPENAI_IMAGE_TOKENS };
  }
  if (CL100K_FAMILIES.test(upstreamModel)) return { tokenizer: 'cl100k_base', maxImageTokens: OPENAI_IMAGE_TOKENS };
  return undefined;
}
