import type { JsonObject } from '../../core/gateway/provider.ts';
import type { MockRandom } from './mock-random.ts';

/**
 * A value valid against a JSON Schema, as a model answering with structured output would give:
 * what tool-call arguments, `response_format: json_schema` and the Responses API's `text.format`
 * get from the mock. It covers the subset OpenAI's structured outputs accept (types and type
 * lists, `required`, `enum`/`const`, nested objects and arrays, `$ref` into `$defs`/`definitions`
 * including recursion, `anyOf`/`oneOf`/`allOf`, string formats, lengths, bounds and `multipleOf`).
 * `pattern` is not generated for: a string under a pattern is the plain text.
 */
export interface SchemaValueSource {
  random: MockRandom;
  /** Words for free-text strings (what the mock "heard"); empty: a stock word. */
  text: string;
}

/** Optional properties, array items and nullable branches are filled up to this depth, the minimum past it. */
const RICH_DEPTH = 4;
/** A schema whose required properties recurse forever stops here with null. */
const MAX_DEPTH = 16;
/**
 * Values generated for one answer, and the longest string or array: past them the answer is the
 * smallest it can be (empty arrays, short strings), so a schema demanding millions of items or
 * characters, or nesting wide arrays deep, cannot make the mock allocate without bound.
 */
const MAX_VALUES = 5_000;
const MAX_LENGTH = 1_000;
const MAX_CHARACTERS = 100_000;

function isRecord(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

export function schemaValue(schema: unknown, source: SchemaValueSource): unknown {
  return new SchemaWalker(isRecord(schema) ? schema : {}, source).value(schema, 0, '');
}

class SchemaWalker {
  private generated = 0;
  private characters = 0;

  constructor(
    private readonly root: JsonObject,
    private readonly source: SchemaValueSource,
  ) {}

  value(schema: unknown, depth: number, key: string): unknown {
    if (schema === true || !isRecord(schema)) return this.text(key, {});
    this.generated++;
    if (depth > MAX_DEPTH) return null;
    const resolved = this.resolve(schema);
    if ('const' in resolved) return resolved['const'];
    if (Array.isArray(resolved['enum']) && resolved['enum'].length > 0) return this.source.random.pick(resolved['enum']);
    const branches = resolved['anyOf'] ?? resolved['oneOf'];
    if (Array.isArray(branches) && branches.length > 0) return this.value(this.chooseBranch(branches, depth), depth, key);
    switch (this.chooseType(resolved, depth)) {
      case 'null':
        return null;
      case 'boolean':
        return this.source.random.next() < 0.5;
      case 'integer':
        return this.integer(resolved);
      case 'number':
        return this.number(resolved);
      case 'array':
        return this.array(resolved, depth);
      case 'object':
        return this.object(resolved, depth);
      default:
        return this.string(resolved, key);
    }
  }

  /** `$ref` followed, `allOf` merged into one schema. */
  private resolve(schema: JsonObject): JsonObject {
    let current = schema;
    for (let hops = 0; typeof current['$ref'] === 'string' && hops < 32; hops++) {
      const { $ref, ...rest } = current;
      const target = this.pointer($ref as string);
      current = { ...target, ...rest };
    }
    if (Array.isArray(current['allOf'])) {
      const { allOf, ...rest } = current;
      let merged: JsonObject = rest;
      for (const part of allOf as unknown[]) {
        if (!isRecord(part)) continue;
        const resolved = this.resolve(part);
        merged = {
          ...resolved,
          ...merged,
          properties: { ...(isRecord(resolved['properties']) ? resolved['properties'] : {}), ...(isRecord(merged['properties']) ? merged['properties'] : {}) },
          required: [...(Array.isArray(resolved['required']) ? resolved['required'] : []), ...(Array.isArray(merged['required']) ? merged['required'] : [])],
        };
      }
      current = merged;
    }
    return current;
  }

  /** A local JSON pointer (`#`, `#/$defs/Node`); anything else resolves to "any value". */
  private pointer(ref: string): JsonObject {
    if (!ref.startsWith('#')) return {};
    let node: unknown = this.root;
    for (const raw of ref
      .slice(1)
      .split('/')
      .filter((part) => part !== '')) {
      const part = safeDecode(raw).replaceAll('~1', '/').replaceAll('~0', '~');
      node = isRecord(node) ? node[part] : Array.isArray(node) ? node[Number(part)] : undefined;
    }
    return isRecord(node) ? node : {};
  }

  /** Deep in the tree, a branch that ends the recursion (null, then a scalar) is taken first. */
  private chooseBranch(branches: unknown[], depth: number): unknown {
    if (depth < RICH_DEPTH) return branches.find((branch) => !(isRecord(branch) && branch['type'] === 'null')) ?? branches[0];
    const ends = branches.find((branch) => isRecord(branch) && branch['type'] === 'null');
    return ends ?? branches.find((branch) => isRecord(branch) && typeof branch['type'] === 'string' && !['object', 'array'].includes(branch['type'])) ?? branches[0];
  }

  private chooseType(schema: JsonObject, depth: number): string {
    const type = schema['type'];
    if (typeof type === 'string') return type;
    if (Array.isArray(type) && type.length > 0) {
      const concrete = type.filter((candidate) => candidate !== 'null');
      if (concrete.length === 0 || (depth >= RICH_DEPTH && type.includes('null'))) return 'null';
      return String(concrete[0]);
    }
    if (isRecord(schema['properties']) || Array.isArray(schema['required'])) return 'object';
    if ('items' in schema || 'prefixItems' in schema) return 'array';
    if (['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'].some((bound) => bound in schema)) return 'number';
    return 'string';
  }

  private object(schema: JsonObject, depth: number): JsonObject {
    const properties = isRecord(schema['properties']) ? schema['properties'] : {};
    const required = new Set(Array.isArray(schema['required']) ? schema['required'].filter((key) => typeof key === 'string') : []);
    const out: JsonObject = {};
    for (const [key, propertySchema] of Object.entries(properties)) {
      if (required.has(key) || depth < RICH_DEPTH) out[key] = this.value(propertySchema, depth + 1, key);
    }
    // Required names without a schema of their own can hold anything; a string is the simplest.
    for (const key of required) if (!(key in out)) out[key] = this.text(key, {});
    return out;
  }

  private array(schema: JsonObject, depth: number): unknown[] {
    const minItems = typeof schema['minItems'] === 'number' && this.generated < MAX_VALUES ? Math.min(schema['minItems'], MAX_LENGTH) : 0;
    const maxItems = typeof schema['maxItems'] === 'number' ? schema['maxItems'] : Number.POSITIVE_INFINITY;
    const prefix = Array.isArray(schema['prefixItems']) ? schema['prefixItems'] : [];
    const wanted = depth < RICH_DEPTH && this.generated < MAX_VALUES ? this.source.random.integer(1, 3) : 0;
    const count = Math.min(Math.max(wanted, minItems, depth < RICH_DEPTH ? prefix.length : 0), maxItems);
    const items: unknown[] = [];
    const seen = new Set<string>();
    for (let index = 0; items.length < count && index < count * 4 && this.generated < MAX_VALUES; index++) {
      const itemSchema = index < prefix.length ? prefix[index] : (schema['items'] ?? {});
      const item = this.value(itemSchema, depth + 1, `item ${index + 1}`);
      if (schema['uniqueItems'] === true) {
        const fingerprint = JSON.stringify(item);
        if (seen.has(fingerprint)) continue;
        seen.add(fingerprint);
      }
      items.push(item);
    }
    return items;
  }

  private integer(schema: JsonObject): number {
    const { low, high } = this.bounds(schema, true);
    const step = typeof schema['multipleOf'] === 'number' && Number.isInteger(schema['multipleOf']) && schema['multipleOf'] > 0 ? schema['multipleOf'] : 1;
    const first = Math.ceil(low / step);
    const last = Math.floor(high / step);
    return (last < first ? first : this.source.random.integer(first, last)) * step;
  }

  private number(schema: JsonObject): number {
    const step = typeof schema['multipleOf'] === 'number' && schema['multipleOf'] > 0 ? schema['multipleOf'] : null;
    const { low, high } = this.bounds(schema, false);
    if (step !== null) {
      const first = Math.ceil(low / step);
      const last = Math.floor(high / step);
      return Number(((last < first ? first : this.source.random.integer(first, last)) * step).toPrecision(12));
    }
    const value = Math.round((low + this.source.random.next() * (high - low)) * 100) / 100;
    return Math.min(Math.max(value, low), high);
  }

  /** Inclusive bounds; exclusive ones moved inward by one (integers) or a hundredth (numbers). */
  private bounds(schema: JsonObject, integer: boolean): { low: number; high: number } {
    const nudge = integer ? 1 : 0.01;
    let low = typeof schema['minimum'] === 'number' ? schema['minimum'] : Number.NEGATIVE_INFINITY;
    let high = typeof schema['maximum'] === 'number' ? schema['maximum'] : Number.POSITIVE_INFINITY;
    if (typeof schema['exclusiveMinimum'] === 'number') low = Math.max(low, schema['exclusiveMinimum'] + nudge);
    if (typeof schema['exclusiveMaximum'] === 'number') high = Math.min(high, schema['exclusiveMaximum'] - nudge);
    if (integer) {
      low = Math.ceil(low);
      high = Math.floor(high);
    }
    // Unbounded sides get a plausible span of a hundred.
    if (!Number.isFinite(low) && !Number.isFinite(high)) return { low: integer ? 1 : 0, high: 100 };
    if (!Number.isFinite(low)) return { low: high - 100, high };
    if (!Number.isFinite(high)) return { low, high: low + 100 };
    return { low, high: Math.max(low, high) };
  }

  private string(schema: JsonObject, key: string): string {
    const formatted = typeof schema['format'] === 'string' ? this.formatted(schema['format']) : null;
    return formatted ?? this.text(key, schema);
  }

  private text(key: string, schema: JsonObject): string {
    const words = this.source.text !== '' ? this.source.text : key !== '' ? `example ${key}` : 'example';
    const minLength = typeof schema['minLength'] === 'number' && this.characters < MAX_CHARACTERS ? Math.min(schema['minLength'], MAX_LENGTH) : 0;
    const maxLength = typeof schema['maxLength'] === 'number' ? schema['maxLength'] : Number.POSITIVE_INFINITY;
    const characters = [...words];
    // Too short: the words again, as often as it takes.
    const repeated = characters.length >= minLength ? characters : [...`${words} `.repeat(Math.ceil(minLength / (characters.length + 1)))];
    const text = repeated.slice(0, Math.max(minLength, Math.min(maxLength, characters.length))).join('');
    this.characters += text.length;
    return text;
  }

  private formatted(format: string): string | null {
    const random = this.source.random;
    const two = (n: number) => String(n).padStart(2, '0');
    const date = `${random.integer(2020, 2026)}-${two(random.integer(1, 12))}-${two(random.integer(1, 28))}`;
    const time = `${two(random.integer(0, 23))}:${two(random.integer(0, 59))}:${two(random.integer(0, 59))}`;
    const hex = (length: number) => Array.from({ length }, () => random.integer(0, 15).toString(16)).join('');
    const word = random.pick(['alpha', 'bravo', 'delta', 'echo', 'lima', 'oscar', 'tango', 'zulu']);
    switch (format) {
      case 'date-time':
        return `${date}T${time}Z`;
      case 'date':
        return date;
      case 'time':
        return `${time}Z`;
      case 'duration':
        return `P${random.integer(1, 30)}DT${random.integer(0, 23)}H`;
      case 'email':
      case 'idn-email':
        return `${word}@example.com`;
      case 'hostname':
      case 'idn-hostname':
        return `${word}.example.com`;
      case 'uri':
      case 'url':
      case 'iri':
        return `https://example.com/${word}`;
      case 'uuid':
        return `${hex(8)}-${hex(4)}-4${hex(3)}-${random.pick(['8', '9', 'a', 'b'])}${hex(3)}-${hex(12)}`;
      case 'ipv4':
        return `192.0.2.${random.integer(1, 254)}`;
      case 'ipv6':
        return `2001:db8::${hex(4)}`;
      default:
        return null;
    }
  }
}
