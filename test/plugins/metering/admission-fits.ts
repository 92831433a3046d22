import type { Test } from 'tap';
import { countTokens as gpt4oChatTokens } from 'gpt-tokenizer/model/gpt-4o';
import { generateToken, SESSION_PREFIX } from '../../../core/identity/api-tokens.ts';
import { loadEncoding } from '../../../providers/input-token-bound.ts';
import { startFakeOpenAIUpstream, type FakeOpenAIUpstream } from '../../fakes/fake-openai-upstream.ts';
import { realServersConfig } from '../../helpers/app.ts';
import { TEST_PRICES } from '../../helpers/gateway.ts';
import { startMeteredGateway, user, type MeteredGateway } from './metered-gateway.ts';

/**
 * Shared by admission-fits.test.ts (one replica) and admission-fits-replicas.test.ts (two): calls
 * whose real usage is known exactly, so a limit can be set to fit exactly N of them.
 *
 * Each prompt has its own fake OpenAI upstream behind a model named after it that declares
 * `o200k_base` (as for an Azure deployment of gpt-4o); the fake reports what OpenAI would: the
 * prompt's gpt-4o chat count (gpt-tokenizer, independent of the gateway's counting) and exactly
 * OUTPUT_TOKENS of output. The model `held` is the English prompt on an upstream that holds every
 * answer until release(). Prices are TEST_PRICES: 1 µ$ per input token, 2 µ$ per output token.
 */
export const OUTPUT_TOKENS = 20;
/** 7 bytes each for English and code, as in the issue; CJK is 3 bytes a character. */
export const PROMPTS = { english: 'Hello!!', cjk: '你好，世界', code: 'f(x)=1;' } as const;
export type PromptName = keyof typeof PROMPTS;
export const PROMPT_NAMES = Object.keys(PROMPTS) as PromptName[];

export const inputTokensOf = (prompt: string) => gpt4oChatTokens(user(prompt));
export const tokensPerCall = (prompt: string) => inputTokensOf(prompt) + OUTPUT_TOKENS;
export const microsPerCall = (prompt: string) => inputTokensOf(prompt) * 1 + OUTPUT_TOKENS * 2;
export const callBody = (model: PromptName | 'held') => ({ model, messages: user(PROMPTS[model === 'held' ? 'english' : model]), max_tokens: OUTPUT_TOKENS });
/** A blocking cap that fits exactly `calls` calls of `prompt`. */
export const capFitting = (calls: number, prompt: string, period = 'total') => ({ usd: (calls * microsPerCall(prompt)) / 1e6, period, mode: 'blocking' });

/**
 * Bounds that only a failing test meets: a burst of hundreds of calls on a machine shared with
 * other work can take seconds to connect, and a call that times out would be neither admitted
 * nor refused in the counts.
 */
const PATIENT = { connectMs: 60_000, firstByteMs: 60_000, totalMs: 120_000 };
const PATIENT_FAILOVER = { initialBackoffMs: 5, maxBackoffMs: 20, deadlineMs: 120_000, ttftTimeoutMs: 60_000, maxRetryAfterMs: 1_500, retriesPerRoute: 0, maxAttempts: 1 };

/** For waitFor: it only bounds a failing test, and hundreds of calls on a busy shared machine can take a while to be decided. */
/** Each file runs its tests on the embedded backend and, when CI provides them, on the real servers. */
const real = realServersConfig();
export const FIT_BACKENDS = [
  { name: 'embedded: PGlite + in-memory coordination', skip: false as const, onRealServers: false },
  { name: 'PostgreSQL + Redis', skip: real ? (false as const) : 'needs TEST_PG_URL and TEST_REDIS_URL', onRealServers: true },
];

export const LONG_DEADLINE_MS = 60_000;

export interface Fixture {
  replicas: MeteredGateway[];
  held: FakeOpenAIUpstream;
  /** Lets the `held` model's calls answer. */
  release(): void;
}

/** Gateways sharing one database and coordination store: a fresh schema and prefix on the real servers, else one embedded gateway. */
export async function startFixture(t: Test, replicas: 1 | 2, onRealServers: boolean): Promise<Fixture> {
  // The tokenizer's tables load once per process; a call arriving before would keep the byte bound.
  await loadEncoding('o200k_base');
  let release!: () => void;
  const holding = new Promise<void>((resolve) => (release = resolve));
  const upstreams: Record<string, FakeOpenAIUpstream> = {};
  for (const name of [...PROMPT_NAMES, 'held'] as const) {
    const usage = { prompt_tokens: inputTokensOf(PROMPTS[name === 'held' ? 'english' : name]), completion_tokens: OUTPUT_TOKENS };
    const upstream = await startFakeOpenAIUpstream({ defaultReply: { usage, ...(name === 'held' ? { holdUntil: holding } : {}) } });
    t.teardown(() => upstream.close());
    upstreams[name] = upstream;
  }
  const providers: Record<string, unknown> = { mock: { type: 'mock' } };
  const models: Record<string, unknown> = { 'mock-small': { routes: [{ provider: 'mock', model: 'mock-small' }], prices: TEST_PRICES } };
  for (const [name, upstream] of Object.entries(upstreams)) {
    providers[name] = { type: 'openai', baseUrl: upstream.baseUrl, apiKey: 'sk-test', allowPrivateNetwork: true };
    models[name] = { routes: [{ provider: name, model: 'gpt-4o' }], tokenizer: 'o200k_base', prices: TEST_PRICES };
  }
  const fresh = onRealServers ? realServersConfig() : null;
  if (onRealServers && !fresh) throw new Error('needs TEST_PG_URL and TEST_REDIS_URL');
  if (fresh) t.teardown(() => fresh.dropSchema());
  const ownerToken = generateToken(SESSION_PREFIX);
  const started: MeteredGateway[] = [];
  for (let i = 0; i < replicas; i += 1) {
    started.push(
      await startMeteredGateway(t, { storage: fresh?.storage, ownerToken, inference: { providers, models, timeouts: PATIENT, failover: PATIENT_FAILOVER }, upstream: upstreams['english']! }),
    );
  }
  return { replicas: started, held: upstreams['held']!, release };
}

/**
 * One call through app.inject: the bursts are hundreds of calls on a machine shared with other
 * work, and skipping the client's socket keeps them quick; the upstream is still called over HTTP.
 */
export async function chat(g: MeteredGateway, key: string, body: Record<string, unknown>): Promise<{ status: number; body: any }> {
  const response = await g.test.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${key}` }, payload: body });
  return { status: response.statusCode, body: response.json() };
}

/** `count` concurrent calls, spread over the gateways in turn; their outcomes (`200`, `402 budget_exceeded`…) in call order. */
export async function burst(replicas: MeteredGateway[], key: string, body: Record<string, unknown>, count: number): Promise<string[]> {
  const calls = Array.from({ length: count }, (_, i) => chat(replicas[i % replicas.length]!, key, body));
  return (await Promise.all(calls)).map(outcome);
}

export const outcome = (result: { status: number; body: any }) => (result.status === 200 ? '200' : `${result.status} ${result.body?.error?.code}`);

/** How many outcomes have this status, and (for a failing test's message) what all of them were. */
export function countOf(outcomes: Array<string | number>, status: number): number {
  return outcomes.filter((o) => Number.parseInt(String(o), 10) === status).length;
}

export function tally(outcomes: Array<string | number>): string {
  const counts = new Map<string, number>();
  for (const o of outcomes) counts.set(String(o), (counts.get(String(o)) ?? 0) + 1);
  return [...counts].map(([o, n]) => `${n} × ${o}`).join(', ');
}

/** Served calls in the request log for some keys, and what they cost. */
export async function served(g: MeteredGateway, keyIds: string[]): Promise<{ calls: number; cost: number }> {
  const { rows } = await g.db.query<{ n: bigint; cost: bigint }>(
    'SELECT count(*)::bigint AS n, COALESCE(sum(cost_micros), 0)::bigint AS cost FROM request_logs WHERE status_code = 200 AND key_id = ANY($1::uuid[])',
    [keyIds],
  );
  return { calls: Number(rows[0]!.n), cost: Number(rows[0]!.cost) };
}

export async function settleAll(replicas: MeteredGateway[]): Promise<void> {
  for (const g of replicas) await g.settled();
}

/**
 * Settles every call, then checks that the request log holds exactly `calls` calls of `prompt` for
 * these keys, billed exactly their cost (nothing over), and that the ledger moved by that much
 * since `balanceBefore`.
 */
export async function checkBilled(t: Test, fixture: Fixture, prompt: string, calls: number, keyIds: string[], balanceBefore: bigint): Promise<void> {
  await settleAll(fixture.replicas);
  const g = fixture.replicas[0]!;
  const logged = await served(g, keyIds);
  t.equal(logged.calls, calls, `${calls} calls in the request log`);
  t.equal(logged.cost, calls * microsPerCall(prompt), `billed ${logged.cost} µ$: exactly ${calls} calls' cost, nothing over`);
  t.equal(await g.ledger.balance(g.test.organizationId), balanceBefore - BigInt(logged.cost), 'the ledger is charged exactly what the request log holds');
}

export async function balanceOf(fixture: Fixture): Promise<bigint> {
  const g = fixture.replicas[0]!;
  await g.ledger.ensureAccount(g.test.organizationId, 1_000_000_000n);
  return (await g.ledger.balance(g.test.organizationId))!;
}
