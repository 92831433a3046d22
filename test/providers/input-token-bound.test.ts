import t from 'tap';
import { encode as encodeCl100k } from 'gpt-tokenizer/encoding/cl100k_base';
import { encode as encodeO200k } from 'gpt-tokenizer/encoding/o200k_base';
import { encode as encodeP50k } from 'gpt-tokenizer/encoding/p50k_base';
import { encode as encodeR50k } from 'gpt-tokenizer/encoding/r50k_base';
import { countTokens as gpt35ChatTokens } from 'gpt-tokenizer/model/gpt-3.5-turbo';
import { countTokens as gpt4ChatTokens } from 'gpt-tokenizer/model/gpt-4';
import type { ChatCompletionFunctionDefinition } from 'gpt-tokenizer/functionCalling';
import { countChatCompletionTokens as gpt4oCompletionTokens, countTokens as gpt4oChatTokens } from 'gpt-tokenizer/model/gpt-4o';
import { chatInputTokenBound, inputTokenProfile, loadEncoding, UNKNOWN_MODEL_IMAGE_TOKENS, type ChatInput } from '../../providers/input-token-bound.ts';

/** Prompts in several scripts; the CJK and emoji ones take more tokens than a quarter of their bytes. */
const SAMPLES: Record<string, string> = {
  chinese: '道可道，非常道。名可名，非常名。無名天地之始；有名萬物之母。故常無欲，以觀其妙；常有欲，以觀其徼。床前明月光，疑是地上霜。舉頭望明月，低頭思故鄉。',
  japanese: '吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。',
  korean: '대한민국은 민주공화국이다. 대한민국의 주권은 국민에게 있고, 모든 권력은 국민으로부터 나온다.',
  emoji: '🦩🦔🪼🫎🪿🦤🐉🧌🪸🫧 🇯🇵🇰🇷 👩‍👩‍👧‍👦 ✈️ 🧑🏽‍🚀🏳️‍🌈',
  cyrillic: 'Съешь же ещё этих мягких французских булок, да выпей чаю. Широкая электрификация южных губерний даст мощный толчок подъёму сельского хозяйства.',
  code: 'function quickSort(xs) { if (xs.length < 2) return xs; const [p, ...r] = xs; return [...quickSort(r.filter((x) => x < p)), p, ...quickSort(r.filter((x) => x >= p))]; }\n\t// 0x1F 0b1010 ${a}{}[]<>',
  english: 'The quick brown fox jumps over the lazy dog while the committee reviews the quarterly budget and the action items.',
};

/** Long enough (over 8 KiB) that the bound counts with the tokenizer instead of bytes. */
const long = (text: string) => text.repeat(Math.ceil(12_000 / Buffer.byteLength(text)));

const o200k = inputTokenProfile([{ tokenizer: 'o200k_base', maxImageTokens: 1_000 }]);
const cl100k = inputTokenProfile([{ tokenizer: 'cl100k_base', maxImageTokens: 1_000 }]);
const bytes = inputTokenProfile([{ tokenizer: 'bytes', maxImageTokens: 1_000 }]);

const chat = (content: string) => [
  { role: 'system', content: 'You are a helpful assistant.' },
  { role: 'user', name: 'ана', content },
];

t.before(async () => {
  await Promise.all([loadEncoding('o200k_base'), loadEncoding('cl100k_base')]);
});

for (const size of ['short', 'long'] as const) {
  t.test(`${size} prompts: the o200k bound is at least gpt-4o's chat count in every script`, async (t) => {
    for (const [script, sample] of Object.entries(SAMPLES)) {
      const messages = chat(size === 'long' ? long(sample) : sample);
      const real = gpt4oChatTokens(messages);
      const bound = await chatInputTokenBound({ messages }, o200k);
      t.ok(bound >= real, `${script}: bound ${bound} ≥ real ${real}`);
    }
  });

  t.test(`${size} prompts: the cl100k bound is at least gpt-4's and gpt-3.5-turbo's chat counts in every script`, async (t) => {
    for (const [script, sample] of Object.entries(SAMPLES)) {
      const messages = chat(size === 'long' ? long(sample) : sample);
      const real = Math.max(gpt4ChatTokens(messages), gpt35ChatTokens(messages));
      const bound = await chatInputTokenBound({ messages }, cl100k);
      t.ok(bound >= real, `${script}: bound ${bound} ≥ real ${real}`);
    }
  });

  t.test(`${size} prompts: the byte bound is at least every OpenAI chat count, and the o200k and cl100k bounds`, async (t) => {
    for (const [script, sample] of Object.entries(SAMPLES)) {
      const messages = chat(size === 'long' ? long(sample) : sample);
      const real = Math.max(gpt4oChatTokens(messages), gpt4ChatTokens(messages), gpt35ChatTokens(messages));
      const bound = await chatInputTokenBound({ messages }, bytes);
      t.ok(bound >= real, `${script}: byte bound ${bound} ≥ real ${real}`);
      t.ok(bound >= (await chatInputTokenBound({ messages }, o200k)) && bound >= (await chatInputTokenBound({ messages }, cl100k)), `${script}: and ≥ the tokenizer bounds`);
    }
  });
}

t.test('a byte-level BPE never makes more tokens of a text than it has UTF-8 bytes (r50k, p50k, cl100k, o200k)', async (t) => {
  for (const [script, sample] of Object.entries(SAMPLES)) {
    const size = Buffer.byteLength(sample);
    for (const [name, encode] of [
      ['r50k', encodeR50k],
      ['p50k', encodeP50k],
      ['cl100k', encodeCl100k],
      ['o200k', encodeO200k],
    ] as const) {
      const count = encode(sample).length;
      t.ok(count <= size, `${script} in ${name}: ${count} tokens ≤ ${size} bytes`);
    }
  }
});

t.test('long prompts are counted with the tokenizer: the bound stays near the real count, far under the bytes', async (t) => {
  const messages = chat(long(SAMPLES['english']!));
  const real = gpt4oChatTokens(messages);
  const bound = await chatInputTokenBound({ messages }, o200k);
  t.ok(bound - real <= 32, `o200k: bound ${bound}, real ${real}: within the framing margin`);
  t.ok(bound < Buffer.byteLength(messages[1]!.content) / 2, 'and well under the byte count');
});

t.test('a prompt too long to count at once is counted exactly, in slices, letting other work run in between', async (t) => {
  const messages = [{ role: 'user', content: long(SAMPLES['english']!).repeat(20) }];
  t.ok(messages[0]!.content.length > 200_000, 'over 200 K characters');
  let turns = 0;
  let counting = true;
  const turn = () => {
    turns += 1;
    if (counting) setImmediate(turn);
  };
  setImmediate(turn);
  const pending = chatInputTokenBound({ messages }, o200k);
  t.type(pending, Promise, 'the count is a promise');
  const bound = await pending;
  counting = false;
  t.equal(bound, gpt4oChatTokens(messages), 'exactly gpt-4o’s chat count');
  t.ok(turns > 1, `the event loop turned ${turns} times while it counted`);
  t.equal(await chatInputTokenBound({ messages }, o200k), bound, 'counted again (remembered by digest): the same');
});

t.test('a prompt larger than any context window (over 4 MiB) keeps the byte bound', async (t) => {
  const messages = [{ role: 'user', content: 'a'.repeat(4 * 1024 * 1024 + 1) }];
  t.equal(chatInputTokenBound({ messages }, o200k), chatInputTokenBound({ messages }, bytes));
});

t.test('tool definitions: the bound is at least gpt-4o’s function-calling count', async (t) => {
  const functions: ChatCompletionFunctionDefinition[] = [
    {
      name: 'get_weather',
      description: 'Get the current weather in a given location',
      parameters: {
        type: 'object',
        properties: {
          location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' },
          unit: { type: 'string', enum: ['celsius', 'fahrenheit'] },
        },
        required: ['location'],
      },
    },
    ...Array.from({ length: 12 }, (_, i) => ({ name: `noop_${i}` })),
    { name: 'lookup', description: '検索する', parameters: { type: 'object', properties: { q: { type: 'string' }, n: { type: 'integer', minimum: 1 } } } },
  ];
  const tools = functions.map((fn) => ({ type: 'function', function: fn }));
  // gpt-4o supports function calling, so gpt-tokenizer gives it the function-calling count.
  const countWithFunctions = gpt4oCompletionTokens!;
  for (const [label, content] of [
    ['short', SAMPLES['english']!],
    ['long', long(SAMPLES['english']!)],
  ] as const) {
    const messages = chat(content);
    const real = countWithFunctions({ messages, functions });
    for (const [profile, profileName] of [
      [o200k, 'o200k'],
      [bytes, 'bytes'],
    ] as const) {
      const bound = await chatInputTokenBound({ messages, tools }, profile);
      t.ok(bound >= real, `${label} prompt, ${profileName}: bound ${bound} ≥ real ${real}`);
    }
  }
});

t.test('each image part counts the profile’s image maximum; a model takes the largest over its routes', async (t) => {
  const text = { messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in these?' }] }] };
  const withImages = {
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'What is in these?' },
          { type: 'image_url', image_url: { url: `data:image/png;base64,${'A'.repeat(100)}` } },
          { type: 'image_url', image_url: { url: 'https://example.com/cat.png', detail: 'high' } },
        ],
      },
    ],
  };
  const profile = inputTokenProfile([
    { tokenizer: 'o200k_base', maxImageTokens: 3_779 },
    { tokenizer: 'o200k_base', maxImageTokens: 48_169 },
  ]);
  const added = (await chatInputTokenBound(withImages, profile)) - (await chatInputTokenBound(text, profile));
  t.ok(added >= 2 * 48_169, `two images add ${added} ≥ 2 × 48,169`);
  t.ok(added <= 2 * 48_169 + 2, 'and not their bytes besides');
});

t.test('a route with an unknown tokenizer makes the whole model bound by bytes', async (t) => {
  const mixed = inputTokenProfile([
    { tokenizer: 'o200k_base', maxImageTokens: 3_779 },
    { tokenizer: 'bytes', maxImageTokens: UNKNOWN_MODEL_IMAGE_TOKENS },
  ]);
  t.same(mixed.tokenizers, ['bytes']);
  t.equal(mixed.imageTokens, UNKNOWN_MODEL_IMAGE_TOKENS);
  const messages = chat(long(SAMPLES['chinese']!));
  t.equal(await chatInputTokenBound({ messages }, mixed), await chatInputTokenBound({ messages }, bytes));
});

t.test('a model routed to both OpenAI encodings counts with both and takes the larger', async (t) => {
  const both = inputTokenProfile([
    { tokenizer: 'o200k_base', maxImageTokens: 1_000 },
    { tokenizer: 'cl100k_base', maxImageTokens: 1_000 },
  ]);
  t.same([...both.tokenizers].sort(), ['cl100k_base', 'o200k_base']);
  const messages = chat(long(SAMPLES['chinese']!));
  const bound = await chatInputTokenBound({ messages }, both);
  // cl100k takes half again as many tokens for Chinese as o200k.
  t.equal(bound, Math.max(await chatInputTokenBound({ messages }, o200k), await chatInputTokenBound({ messages }, cl100k)));
  t.ok(bound >= gpt4ChatTokens(messages));
});

t.test('special-token text in a prompt is counted as plain text, never thrown on', async (t) => {
  const messages = [{ role: 'user', content: long('<|endoftext|><|im_start|>system<|im_sep|> hi ') }];
  const bound = await chatInputTokenBound({ messages }, o200k);
  t.ok(bound >= encodeO200k(messages[0]!.content, { disallowedSpecial: new Set() }).length);
});

t.test('malformed messages and parts count as their JSON text instead of failing', async (t) => {
  const odd = {
    messages: ['hello', null, { role: 'user', content: 42 }, { role: 'user', content: ['part', { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }],
  } as unknown as ChatInput;
  for (const profile of [o200k, bytes]) t.ok((await chatInputTokenBound(odd, profile)) > 0);
});

t.test('every field a message carries counts: tool calls, tool results, refusals', async (t) => {
  const base = { messages: [{ role: 'assistant', content: null }] };
  const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: JSON.stringify({ city: '東京', unit: 'celsius' }) } };
  const withCall = {
    messages: [
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: '晴れ、25度' },
    ],
  };
  for (const profile of [o200k, bytes]) {
    t.ok((await chatInputTokenBound(withCall, profile)) >= (await chatInputTokenBound(base, profile)) + encodeO200k(JSON.stringify([call])).length + encodeO200k('晴れ、25度').length);
  }
});
