import { createHash } from 'node:crypto';
import type { EmbeddingsRequestBody, JsonObject } from '../../core/gateway/provider.ts';

/**
 * A unit vector determined by the text alone: SHA-256 in counter mode gives the components, so
 * equal inputs embed equally and different inputs almost surely do not.
 */
export function mockEmbedding(text: string, dimensions: number): Float32Array {
  const vector = new Float32Array(dimensions);
  for (let block = 0; block * 8 < dimensions; block++) {
    const digest = createHash('sha256').update(`${block}:${text}`).digest();
    for (let i = 0; i < 8 && block * 8 + i < dimensions; i++) {
      vector[block * 8 + i] = digest.readUInt32LE(i * 4) / 0xffffffff - 0.5;
    }
  }
  let norm = 0;
  for (const value of vector) norm += value * value;
  norm = Math.sqrt(norm) || 1;
  for (let i = 0; i < dimensions; i++) vector[i] = vector[i]! / norm;
  return vector;
}

/** Each input as the text it stands for: strings as they are, token arrays by their numbers. */
export function embeddingInputs(input: EmbeddingsRequestBody['input']): string[] {
  if (typeof input === 'string') return [input];
  if (input.length === 0) return [];
  if (typeof input[0] === 'number') return [JSON.stringify(input)];
  return (input as Array<string | number[]>).map((item) => (typeof item === 'string' ? item : JSON.stringify(item)));
}

/** OpenAI's embedding item: a float array, or base64 of little-endian float32 (the SDKs' default). */
export function embeddingItem(vector: Float32Array, index: number, format: unknown): JsonObject {
  const embedding = format === 'base64' ? Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength).toString('base64') : Array.from(vector);
  return { object: 'embedding', index, embedding };
}
