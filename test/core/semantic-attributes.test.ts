import t from 'tap';
import { ATTR_ERROR_TYPE, ATTR_HTTP_RESPONSE_STATUS_CODE } from '@opentelemetry/semantic-conventions';
import {
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_REQUEST_STREAM,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  GEN_AI_OPERATION_NAME_VALUE_CHAT,
  GEN_AI_OPERATION_NAME_VALUE_EMBEDDINGS,
  GEN_AI_OPERATION_NAME_VALUE_GENERATE_CONTENT,
} from '@opentelemetry/semantic-conventions/incubating';
import { ATTR, GEN_AI, GEN_AI_OPERATION } from '../../core/observability/semantic-attributes.ts';

/** The attribute names spans use are spelled in the source (the package stays unloaded at start): each is the package's. */

t.test('the stable attribute names are the semantic-conventions package’s', async (t) => {
  t.same(ATTR, { ERROR_TYPE: ATTR_ERROR_TYPE, HTTP_RESPONSE_STATUS_CODE: ATTR_HTTP_RESPONSE_STATUS_CODE });
});

t.test('the GenAI attribute names are the package’s incubating ones', async (t) => {
  t.same(GEN_AI, {
    OPERATION_NAME: ATTR_GEN_AI_OPERATION_NAME,
    PROVIDER_NAME: ATTR_GEN_AI_PROVIDER_NAME,
    REQUEST_MODEL: ATTR_GEN_AI_REQUEST_MODEL,
    REQUEST_STREAM: ATTR_GEN_AI_REQUEST_STREAM,
    RESPONSE_MODEL: ATTR_GEN_AI_RESPONSE_MODEL,
    RESPONSE_TIME_TO_FIRST_CHUNK: ATTR_GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK,
    USAGE_INPUT_TOKENS: ATTR_GEN_AI_USAGE_INPUT_TOKENS,
    USAGE_OUTPUT_TOKENS: ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
    USAGE_CACHE_READ_INPUT_TOKENS: ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  });
});

t.test('every operation name is one of the conventions’ values', async (t) => {
  const values = new Set<string>([GEN_AI_OPERATION_NAME_VALUE_CHAT, GEN_AI_OPERATION_NAME_VALUE_EMBEDDINGS, GEN_AI_OPERATION_NAME_VALUE_GENERATE_CONTENT]);
  for (const [modality, name] of Object.entries(GEN_AI_OPERATION)) t.ok(values.has(name), `${modality}: ${name}`);
});
