import type { FastifyInstance } from 'fastify';
import { ApiError } from '../kernel/errors.ts';

/**
 * How deeply arrays and objects may nest in a request body. JSON.parse itself copes with any depth,
 * but everything after it that walks a value recursively (JSON.stringify towards an upstream or the
 * request log, token counting, validation, PostgreSQL's jsonb) overflows its stack somewhere in
 * the thousands. No request the service understands comes near this: a tool's JSON Schema nested
 * ten levels sits at about 25.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * Replaces Fastify's JSON parser with the same parser (same prototype-poisoning refusals, same
 * errors) followed by a bounded walk that refuses a body nested deeper than MAX_JSON_DEPTH: 400
 * naming the top-level field that holds it. The walk visits each array and object once and never
 * recurses further than the bound, so it costs next to nothing for ordinary bodies.
 */
export function installJsonBodyParser(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    parse(request, body as string, (error, value) => {
      if (error) return done(error, undefined);
      const field = fieldNestedTooDeep(value);
      if (field === undefined) return done(null, value);
      const where = field === null ? 'The body' : `'${field}'`;
      const message = `${where} nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep`;
      done(new ApiError(field === null ? 'invalid_body' : 'invalid_parameter', message, { param: field }), undefined);
    });
  });
}

/** undefined when the value is shallow enough; else the top-level field that is not (null: the root is an array). */
export function fieldNestedTooDeep(value: unknown): string | null | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  if (Array.isArray(value)) return deeperThan(value, MAX_JSON_DEPTH) ? null : undefined;
  const object = value as Record<string, unknown>;
  for (const key in object) {
    const item = object[key];
    if (typeof item === 'object' && item !== null && deeperThan(item, MAX_JSON_DEPTH - 1)) return key;
  }
  return undefined;
}

/** Whether the array or object `container` nests more than `levels` deep (itself counting one). */
function deeperThan(container: object, levels: number): boolean {
  if (levels === 0) return true;
  if (Array.isArray(container)) {
    for (let i = 0; i < container.length; i += 1) {
      const item: unknown = container[i];
      if (typeof item === 'object' && item !== null && deeperThan(item, levels - 1)) return true;
    }
    return false;
  }
  const object = container as Record<string, unknown>;
  for (const key in object) {
    const item = object[key];
    if (typeof item === 'object' && item !== null && deeperThan(item, levels - 1)) return true;
  }
  return false;
}
