import type { AddressInfo } from 'node:net';
import OpenAI, { toFile } from 'openai';
import t from 'tap';
import type { InputGuardCheck } from '../../../core/gateway/input-guards.ts';
import { InputGuardsPoint } from '../../../core/gateway/input-guards.ts';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { definePlugin } from '../../../core/kernel/plugin.ts';
import { manifest as defaultManifest } from '../../../plugins/index.ts';
import { MeteringTokens } from '../../../plugins/metering/index.ts';
import { speechWav } from '../../../providers/mock/mock-speech.ts';
import { startFakeOpenAIUpstream } from '../../fakes/fake-openai-upstream.ts';
import { allPlugins, buildTestApp, createKey } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';

/**
 * Audio calls as metering, the request log and data guardrails see them, over a listening gateway
 * with metering: speech is billed per input character at $0.000015 (15 µ$), transcription per
 * started second of the audio read from the file at $0.0001 (100 µ$). A guard of this test blocks
 * "SECRET" and redacts one e-mail address for keys named `guarded…`.
 */

t.setTimeout(240_000);

const check: InputGuardCheck = {
  check(text) {
    if (text.includes('SECRET')) return { action: 'block', rule: 'no-secrets' };
    if (text.includes('alice@example.com')) return { action: 'redact', text: text.replaceAll('alice@example.com', '[email]'), rule: 'emails' };
    return { action: 'allow' };
  },
};
const guardPlugin = definePlugin({
  name: 'test-guard',
  description: 'a data guardrail for tests',
  register({ extensions }) {
    extensions.contribute(InputGuardsPoint, { forCall: (credential) => (credential.kind === 'key' && credential.keyName.startsWith('guarded') ? check : null) });
  },
});

const upstream = await startFakeOpenAIUpstream();
t.teardown(() => upstream.close());
const speech = { modalities: { input: ['text'], output: ['audio'] }, speech: { voices: ['alloy'], formats: ['wav', 'pcm'] }, prices: { ...TEST_PRICES, perCharacterUsd: 0.000015 } };
const transcription = { modalities: { input: ['audio'], output: ['text'] }, transcription: {}, prices: { ...TEST_PRICES, perAudioSecondUsd: 0.0001 } };
const test = await buildTestApp(t, {
  manifest: [...defaultManifest, guardPlugin],
  plugins: {
    ...allPlugins(),
    'test-guard': {},
    inference: {
      providers: { mock: { type: 'mock' }, primary: { type: 'openai', baseUrl: upstream.baseUrl, apiKey: 'sk-primary-secret', allowPrivateNetwork: true } },
      models: {
        'tts-mock': { ...speech, routes: [{ provider: 'mock', model: 'mock-tts' }] },
        'tts-up': { ...speech, routes: [{ provider: 'primary', model: 'up-tts' }] },
        'stt-mock': { ...transcription, routes: [{ provider: 'mock', model: 'mock-transcribe' }] },
        'stt-up': { ...transcription, routes: [{ provider: 'primary', model: 'up-stt' }] },
      },
      failover: { retriesPerRoute: 0, maxAttempts: 1 },
    },
    metering: { initialCreditUsd: 1000, limits: { keyDefaults: { requestsPerMinute: null, tokensPerMinute: null, concurrency: null }, project: {}, account: {} } },
  },
});
await test.app.listen({ host: '127.0.0.1', port: 0 });
const url = `http://127.0.0.1:${(test.app.server.address() as AddressInfo).port}/v1`;
const container = test.app.svc.container;
const db = container.resolve(Tokens.Database);
const writer = container.resolve(MeteringTokens.Writer);
const flush = async () => {
  await container.resolve(MeteringTokens.Admission).idle();
  for (let round = 0; round < 50 && writer.snapshot().queued > 0; round += 1) await writer.flush();
};
const logRow = async (requestId: string | null) => {
  await flush();
  const { rows } = await db.query('SELECT * FROM request_logs WHERE id = $1', [requestId]);
  return rows[0] as Record<string, any>;
};
const loggedBodies = async (requestId: string | null) => {
  await flush();
  const { rows } = await db.query('SELECT request_body, response_body FROM request_log_bodies WHERE request_id = $1', [requestId]);
  return rows[0] as { request_body: any; response_body: any } | undefined;
};
const charged = async () => {
  await flush();
  const { rows } = await db.query<{ total: string }>("SELECT COALESCE(-sum(amount_micros), 0)::text AS total FROM credit_ledger WHERE kind = 'ai_usage'");
  return BigInt(rows[0]!.total);
};
const client = (key: string) => new OpenAI({ apiKey: key, baseURL: url, maxRetries: 0 });
const plain = client((await createKey(test, { name: 'plain key', scopes: ['inference'] })).key);
const guarded = client((await createKey(test, { name: 'guarded key', scopes: ['inference'] })).key);
t.equal((await test.call('POST', '/client/log-requests', { body: { enabled: true } })).statusCode, 200, 'bodies are logged for this account');
t.beforeEach(() => upstream.reset());

/** 38 characters spoken by the mock at 0.06 s each: 2.28 seconds of audio, billed as 3. */
const SPOKEN = 'The mock speaks, and the mock listens.';
const spokenWav = speechWav(SPOKEN, 1);

t.test('speech', async (t) => {
  t.test('each input character is billed, in the request log and the ledger alike', async (t) => {
    const before = await charged();
    const input = 'Ça va? 😀 Très bien.';
    const { response } = await plain.audio.speech.create({ model: 'tts-mock', voice: 'alloy', input }).withResponse();
    await response.arrayBuffer();
    const row = await logRow(response.headers.get('x-request-id'));
    t.match(row, { status_code: 200, endpoint: '/v1/audio/speech', provider: 'mock', characters: 19 });
    t.equal(BigInt(row.cost_micros), 19n * 15n, '19 code points (the emoji is one) at 15 µ$');
    t.equal((await charged()) - before, 285n, 'the ledger took the same');
  });

  t.test('audio cut off by the upstream after it began is logged as 502 upstream_error', async (t) => {
    upstream.enqueue({ kind: 'stream-cut', afterChunks: 2 });
    const { response } = await plain.audio.speech.create({ model: 'tts-up', voice: 'alloy', input: 'A longer sentence to speak.' }).withResponse();
    await t.rejects(response.arrayBuffer());
    const row = await logRow(response.headers.get('x-request-id'));
    t.match(row, { status_code: 502, error_code: 'upstream_error', provider: 'primary', characters: 27 });
    t.equal(BigInt(row.cost_micros), 27n * 15n, 'its characters are billed all the same: the upstream spoke them');
  });

  t.test('a client leaving before the audio has all arrived is logged as 499, and the upstream transfer ends', async (t) => {
    upstream.enqueue({ kind: 'reply', chunkDelayMs: 300 });
    const controller = new AbortController();
    const { response } = await plain.audio.speech.create({ model: 'tts-up', voice: 'alloy', input: 'A longer sentence to speak.' }, { signal: controller.signal }).withResponse();
    const reader = response.body!.getReader();
    await reader.read();
    controller.abort();
    const recorded = await upstream.arrived(1);
    t.equal(await recorded.outcome, 'closed', 'the gateway closed its upstream request');
    const row = await logRow(response.headers.get('x-request-id'));
    t.match(row, { status_code: 499, error_code: 'client_closed_request', characters: 27 });
  });

  t.test('the request log keeps the request and what was answered, not the audio', async (t) => {
    const { response } = await plain.audio.speech.create({ model: 'tts-mock', voice: 'alloy', input: 'Kept.' }).withResponse();
    await response.arrayBuffer();
    t.same(await loggedBodies(response.headers.get('x-request-id')), {
      request_body: { model: 'tts-mock', voice: 'alloy', input: 'Kept.' },
      response_body: { contentType: 'audio/wav', characters: 5 },
    });
  });

  t.test('data guardrails read the input: a block is 422 and nothing is spoken', async (t) => {
    const error = await guarded.audio.speech.create({ model: 'tts-up', voice: 'alloy', input: 'my SECRET' }).catch((e: unknown) => e);
    t.match(error, { status: 422, code: 'guardrail_blocked' });
    t.equal(upstream.requests.length, 0);
  });
});

t.test('transcription', async (t) => {
  t.test('the seconds read from the file are billed, each started second whole', async (t) => {
    const before = await charged();
    const { data, response } = await plain.audio.transcriptions.create({ model: 'stt-mock', file: await toFile(spokenWav, 'speech.wav') }).withResponse();
    t.equal(data.text, SPOKEN);
    const row = await logRow(response.headers.get('x-request-id'));
    t.match(row, { status_code: 200, endpoint: '/v1/audio/transcriptions', audio_seconds: 3 });
    t.equal(BigInt(row.cost_micros), 300n, '3 seconds at 100 µ$');
    t.equal((await charged()) - before, 300n, 'the ledger took the same');
  });

  t.test('what the upstream reports does not change the bill', async (t) => {
    const { data, response } = await plain.audio.transcriptions.create({ model: 'stt-up', file: await toFile(spokenWav, 'speech.wav') }).withResponse();
    const reported = (data as unknown as { usage: { seconds: number } }).usage.seconds;
    t.not(reported, 3, `the fake upstream misreads this WAV's length (${reported} s)`);
    const row = await logRow(response.headers.get('x-request-id'));
    t.match(row, { audio_seconds: 3 });
    t.equal(BigInt(row.cost_micros), 300n);
  });

  t.test('the request log keeps the form with the file described, not its bytes', async (t) => {
    const { response } = await plain.audio.transcriptions.create({ model: 'stt-mock', file: await toFile(spokenWav, 'speech.wav', { type: 'audio/wav' }), prompt: 'A test.' }).withResponse();
    const bodies = await loggedBodies(response.headers.get('x-request-id'));
    t.match(bodies?.request_body, { model: 'stt-mock', prompt: 'A test.', file: { filename: 'speech.wav', contentType: 'audio/wav', bytes: spokenWav.length } });
    t.notOk('data' in (bodies?.request_body.file ?? {}));
    t.match(bodies?.response_body, { text: SPOKEN });
  });

  t.test('data guardrails read the prompt: a block is 422, a redaction is what goes upstream', async (t) => {
    const file = await toFile(spokenWav, 'speech.wav');
    const error = await guarded.audio.transcriptions.create({ model: 'stt-up', file, prompt: 'my SECRET' }).catch((e: unknown) => e);
    t.match(error, { status: 422, code: 'guardrail_blocked' });
    t.equal(upstream.requests.length, 0);
    await guarded.audio.transcriptions.create({ model: 'stt-up', file, prompt: 'for alice@example.com' });
    t.equal((upstream.requests[0]?.body as { fields: Record<string, string> } | undefined)?.fields['prompt'], 'for [email]');
  });
});

t.test('the usage report sums characters and seconds with their cost', async (t) => {
  const today = new Date().toISOString().slice(0, 10);
  const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
  await flush();
  const { rows } = await db.query<{ characters: string; seconds: string; cost: string }>(
    "SELECT sum(characters)::text AS characters, sum(audio_seconds)::text AS seconds, sum(cost_micros)::text AS cost FROM request_logs WHERE endpoint LIKE '/v1/audio/%'",
  );
  const report = (await test.call('GET', `/client/usage?from=${today}&to=${tomorrow}`)).json();
  t.match(report.totals.units, { characters: Number(rows[0]!.characters), audioSeconds: Number(rows[0]!.seconds) });
  t.ok(Number(rows[0]!.characters) > 0 && Number(rows[0]!.seconds) > 0, 'both units were used');
  t.equal(report.totals.costUsd, Number(rows[0]!.cost) / 1e6, 'the report costs what the log and the ledger say');
  t.equal(BigInt(rows[0]!.cost), await charged());
});
