import t from 'tap';
import { estimateChatInputTokens, estimateEmbeddingInputTokens, estimateOutputTokens, estimateTokens } from '../../providers/token-estimate.ts';

t.test('about four bytes a token, rounded up', async (t) => {
  t.equal(estimateTokens(''), 0);
  t.equal(estimateTokens('abc'), 1);
  t.equal(estimateTokens('abcd'), 1);
  t.equal(estimateTokens('abcde'), 2);
});

t.test('multi-byte scripts count by their UTF-8 size', async (t) => {
  t.equal(estimateTokens('日本語です'), 4);
});

t.test('chat input counts messages, framing, images and tools', async (t) => {
  const plain = estimateChatInputTokens({ messages: [{ role: 'user', content: 'abcd' }] });
  t.equal(plain, 3 + 4 + 1);
  const withImage = estimateChatInputTokens({
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'abcd' },
          { type: 'image_url', image_url: { url: 'data:,' } },
        ],
      },
    ],
  });
  t.equal(withImage, plain + 85);
  const withTools = estimateChatInputTokens({ messages: [{ role: 'user', content: 'abcd' }], tools: [{ type: 'function', function: { name: 'f' } }] });
  t.ok(withTools > plain);
});

t.test('output counts text, reasoning and tool-call arguments', async (t) => {
  t.equal(estimateOutputTokens({ text: 'abcd', reasoning: 'abcd', toolCalls: [{ name: 'abcd', arguments: '{}' }] }), 4);
});

t.test('embedding input counts strings by estimate and token arrays by length', async (t) => {
  t.equal(estimateEmbeddingInputTokens('abcdefgh'), 2);
  t.equal(estimateEmbeddingInputTokens(['abcd', 'abcd']), 2);
  t.equal(estimateEmbeddingInputTokens([1, 2, 3]), 3);
  t.equal(estimateEmbeddingInputTokens([[1, 2], [3]]), 3);
});
