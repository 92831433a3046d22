import { ApiError } from '../../core/kernel/errors.ts';
import { compileBodySchema } from '../../core/kernel/compiled-schema.ts';

/**
 * The `POST /v1/evaluate` request: `{model, state, questions}`, strict (an unknown field anywhere
 * is 400 `unknown_field` naming every one), each malformed question 400 naming its key.
 */

/** Questions per request: each is one upstream call, so the bound is on the calls one request makes. */
export const MAX_QUESTIONS = 32;
/** Options or rungs per question: labels A to T, as many as OpenAI lists alternatives of a token (top_logprobs 20). */
export const MAX_LABELS = 20;
/** Question keys: what the answer is keyed by, and what a 400 names (`questions.<key>`). */
const KEY_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

export interface BooleanQuestion {
  type: 'boolean';
  question: string;
}
export interface ChoiceQuestion {
  type: 'choice';
  question: string;
  options: string[];
}
export interface ScoreQuestion {
  type: 'score';
  question: string;
  rungs: number[];
}
export type EvaluateQuestion = BooleanQuestion | ChoiceQuestion | ScoreQuestion;

export interface EvaluateRequest {
  model: string;
  /** Text, or a JSON object shown to the model as compact JSON. */
  state: string | Record<string, unknown>;
  questions: Record<string, EvaluateQuestion>;
}

const FIELDS_OF_TYPE: Readonly<Record<EvaluateQuestion['type'], readonly string[]>> = {
  boolean: ['type', 'question'],
  choice: ['type', 'question', 'options'],
  score: ['type', 'question', 'rungs'],
};

const question = (type: EvaluateQuestion['type'], extra: Record<string, unknown> = {}) => ({
  type: 'object',
  required: [...FIELDS_OF_TYPE[type]],
  additionalProperties: false,
  properties: { type: { const: type }, question: { type: 'string', minLength: 1 }, ...extra },
});

/** The request as a JSON Schema: what the route checks (with the rules below it cannot say) and what the input fuzzing reads. */
export const evaluateRequestSchema = {
  type: 'object',
  required: ['model', 'state', 'questions'],
  additionalProperties: false,
  properties: {
    model: { type: 'string' },
    state: { anyOf: [{ type: 'string', minLength: 1 }, { type: 'object' }] },
    questions: {
      type: 'object',
      minProperties: 1,
      maxProperties: MAX_QUESTIONS,
      propertyNames: { pattern: KEY_PATTERN.source },
      additionalProperties: {
        type: 'object',
        required: ['type'],
        discriminator: { propertyName: 'type' },
        oneOf: [
          question('boolean'),
          question('choice', { options: { type: 'array', minItems: 2, maxItems: MAX_LABELS, uniqueItems: true, items: { type: 'string', minLength: 1 } } }),
          question('score', { rungs: { type: 'array', minItems: 2, maxItems: MAX_LABELS, uniqueItems: true, items: { type: 'number' } } }),
        ],
      },
    },
  },
};

const checkShape = compileBodySchema<EvaluateRequest>(evaluateRequestSchema);

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);

const invalid = (param: string, message: string) => new ApiError('invalid_parameter', message, { param });

function refuseUnknown(value: Record<string, unknown>, known: readonly string[], prefix: string): void {
  const unknown = Object.keys(value).filter((field) => !known.includes(field));
  if (unknown.length === 0) return;
  const fields = unknown.map((field) => `${prefix}${field}`);
  throw new ApiError('unknown_field', `Unknown ${fields.length > 1 ? 'fields' : 'field'} in body: ${fields.join(', ')}`, { param: fields[0]! });
}

/**
 * Checks the body: the rules a caller most needs worded come first, by hand (unknown fields, all
 * named; the question count; each question's key and fields, the message naming the key), then
 * the schema for the rest (model, the question text), its 400 naming the field.
 */
export function parseEvaluateRequest(raw: unknown): EvaluateRequest {
  if (!isObject(raw)) throw new ApiError('invalid_body', 'The body must be a JSON object: {model, state, questions}');
  refuseUnknown(raw, ['model', 'state', 'questions'], '');
  const state = raw['state'];
  if (state !== undefined && !((typeof state === 'string' && state !== '') || isObject(state))) {
    throw invalid('state', "'state' must be a non-empty string or a JSON object");
  }
  const questions = raw['questions'];
  if (isObject(questions)) checkQuestions(questions);
  return checkShape(raw);
}

function checkQuestions(questions: Record<string, unknown>): void {
  const keys = Object.keys(questions);
  if (keys.length === 0) throw invalid('questions', "'questions' must hold at least one question");
  if (keys.length > MAX_QUESTIONS) throw invalid('questions', `'questions' holds ${keys.length} questions; at most ${MAX_QUESTIONS} are allowed per request`);
  for (const key of keys) {
    if (!KEY_PATTERN.test(key)) {
      throw invalid(`questions.${key}`, `Question key ${JSON.stringify(key)} is malformed: keys are 1 to 64 letters, digits, '_' or '-'`);
    }
    const asked = questions[key];
    const param = `questions.${key}`;
    if (!isObject(asked)) throw invalid(param, `Question '${key}' must be an object: {type, question, …}`);
    const type = asked['type'];
    if (type !== 'boolean' && type !== 'choice' && type !== 'score') {
      throw invalid(`${param}.type`, `Question '${key}': 'type' must be one of "boolean", "choice", "score"`);
    }
    refuseUnknown(asked, FIELDS_OF_TYPE[type], `${param}.`);
    const labels = type === 'choice' ? 'options' : type === 'score' ? 'rungs' : null;
    if (labels) checkLabels(key, labels, asked[labels]);
  }
}

/** Options and rungs: present, 2 to MAX_LABELS of them, distinct (each becomes one answer label). */
function checkLabels(key: string, field: 'options' | 'rungs', values: unknown): void {
  const param = `questions.${key}.${field}`;
  const what = field === 'options' ? 'non-empty strings' : 'numbers';
  const one = field === 'options' ? 'a non-empty string' : 'a finite number';
  if (!Array.isArray(values)) throw invalid(param, `Question '${key}': '${field}' must be an array of 2 to ${MAX_LABELS} distinct ${what}`);
  if (values.length < 2 || values.length > MAX_LABELS) {
    throw invalid(param, `Question '${key}': '${field}' holds ${values.length}; 2 to ${MAX_LABELS} are allowed`);
  }
  const seen = new Set<unknown>();
  values.forEach((value, index) => {
    const fits = field === 'options' ? typeof value === 'string' && value !== '' : typeof value === 'number' && Number.isFinite(value);
    if (!fits) throw invalid(`${param}[${index}]`, `Question '${key}': '${field}[${index}]' must be ${one}`);
    if (seen.has(value)) throw invalid(`${param}[${index}]`, `Question '${key}': '${field}[${index}]' repeats ${JSON.stringify(value)}; each must be distinct`);
    seen.add(value);
  });
}
