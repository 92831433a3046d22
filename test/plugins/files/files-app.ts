import type { AddressInfo } from 'node:net';
import type { LightMyRequestResponse } from 'fastify';
import OpenAI from 'openai';
import { Tokens } from '../../../core/kernel/di-tokens.ts';
import { allPlugins, buildTestApp, createKey, type TapLike, type TestApp, type TestAppOptions } from '../../helpers/app.ts';
import { type FormPart, formBody } from '../../helpers/multipart.ts';

/** A batch request line as OpenAI's batch input has it. */
export function batchLine(customId: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { custom_id: customId, method: 'POST', url: '/v1/chat/completions', body: { model: 'mock-small', messages: [{ role: 'user', content: `hello ${customId}` }] }, ...overrides };
}

/** JSONL of the lines (objects are serialised, strings kept as they are), ending in a newline. */
export function jsonl(lines: ReadonlyArray<Record<string, unknown> | string>): Buffer {
  return Buffer.from(`${lines.map((line) => (typeof line === 'string' ? line : JSON.stringify(line))).join('\n')}\n`);
}

export interface FilesApp {
  test: TestApp;
  /** An inference key of the default project. */
  key: string;
  /** Uploads with app.inject, fields in the order given (OpenAI's SDK sends `file` first). */
  upload(parts: Record<string, FormPart>, token?: string): Promise<LightMyRequestResponse>;
  /** How many file contents the organisation has in the blob store. */
  storedContents(organizationId?: string): Promise<number>;
}

/** Every plugin with the files plugin's settings given, and an inference key. */
export async function filesApp(t: TapLike, options: { files?: Record<string, unknown>; clock?: () => Date; config?: TestAppOptions['config'] } = {}): Promise<FilesApp> {
  const test = await buildTestApp(t, {
    plugins: { ...allPlugins(), files: options.files ?? {} },
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.config ? { config: options.config } : {}),
  });
  const { key } = await createKey(test, { name: 'files', scopes: ['inference'] });
  const blobs = test.app.svc.container.resolve(Tokens.Blobs);
  return {
    test,
    key,
    async upload(parts, token = key) {
      const { body, contentType } = await formBody(parts);
      return test.call('POST', '/v1/files', { token, body, headers: { 'content-type': contentType } });
    },
    storedContents: async (organizationId = test.organizationId) => (await blobs.list(`files/${organizationId}/`)).length,
  };
}

/** The app listening on a port, and the official SDK pointed at it with `key`. */
export async function sdkClient(test: TestApp, key: string): Promise<OpenAI> {
  if (!test.app.server.listening) await test.app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(test.app.server.address() as AddressInfo).port}`;
  return new OpenAI({ apiKey: key, baseURL: `${url}/v1`, maxRetries: 0, timeout: 20_000 });
}
