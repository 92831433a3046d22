import type { ChatMessage } from '../../core/gateway/provider.ts';
import type { EvaluateQuestion, EvaluateRequest } from './evaluate-request.ts';

/**
 * What each question of an evaluation is sent upstream as: the same two leading messages for every
 * question of a request (the instructions, then the state), so an upstream's prompt cache reads
 * them after the first call, and the question last, asking for one label. Labels are one token on
 * every common tokenizer: `yes`/`no`, and capital letters for options and rungs (a rung's number,
 * `10` or `2.5`, could be several tokens, and a letter keeps the scale's order visible).
 */
export interface QuestionPrompt {
  key: string;
  question: EvaluateQuestion;
  messages: ChatMessage[];
  labels: string[];
}

const INSTRUCTIONS =
  'You are an evaluator. You are shown a state, then asked one question about it. ' +
  'Answer with exactly one of the labels the question offers, and nothing else: no explanation, no punctuation.';

export const BOOLEAN_LABELS = ['yes', 'no'] as const;

const LETTERS = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** `A`, `B`, `C`… for the options or rungs of a question, in their order. */
export function letterLabels(count: number): string[] {
  return [...LETTERS.slice(0, count)];
}

/** The state as the model reads it: text as it is, an object as compact JSON. */
export function stateText(state: EvaluateRequest['state']): string {
  return typeof state === 'string' ? state : JSON.stringify(state);
}

/** One prompt per question, in the request's order, sharing their first two messages. */
export function questionPrompts(body: EvaluateRequest): QuestionPrompt[] {
  const shared: ChatMessage[] = [
    { role: 'system', content: INSTRUCTIONS },
    { role: 'user', content: `State:\n${stateText(body.state)}` },
  ];
  return Object.entries(body.questions).map(([key, question]) => {
    const { text, labels } = questionText(question);
    return { key, question, messages: [...shared, { role: 'user', content: text }], labels };
  });
}

function questionText(question: EvaluateQuestion): { text: string; labels: string[] } {
  if (question.type === 'boolean') {
    return { text: `Question: ${question.question}\nAnswer yes or no.`, labels: [...BOOLEAN_LABELS] };
  }
  const values = question.type === 'choice' ? question.options : question.rungs.map(String);
  const labels = letterLabels(values.length);
  const listed = values.map((value, index) => `${labels[index]}. ${value}`).join('\n');
  const heading = question.type === 'choice' ? 'Options' : 'Scale';
  const noun = question.type === 'choice' ? 'option' : 'point of the scale';
  return { text: `Question: ${question.question}\n${heading}:\n${listed}\nAnswer with the letter of one ${noun}: ${labels.join(', ')}.`, labels };
}
