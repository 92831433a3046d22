import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { JsonSchemaType, JsonSchemaValidator, jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation';
import type { TapLike, TestApp } from './app.ts';

/** The app listening on loopback (once), for clients that connect for real; its base URL. */
export async function listeningBase(test: TestApp): Promise<string> {
  const address = test.app.server.address();
  if (address && typeof address === 'object') return `http://127.0.0.1:${address.port}`;
  await test.app.listen({ port: 0, host: '127.0.0.1' });
  const bound = test.app.server.address();
  if (!bound || typeof bound !== 'object') throw new Error('not listening');
  return `http://127.0.0.1:${bound.port}`;
}

/**
 * The SDK's own validator of tools' output schemas, each schema compiled once per process: a client compiles
 * one for every tool each time it lists them (about 1.5 s of CPU for the registry's tools), and the scope
 * matrix and the input fuzzing list them with dozens of clients. Same Ajv set-up, same verdicts.
 */
const compiled = new Map<string, JsonSchemaValidator<unknown>>();
const ajvValidator = new AjvJsonSchemaValidator();
const sharedValidator: jsonSchemaValidator = {
  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    const key = JSON.stringify(schema);
    let validator = compiled.get(key);
    if (!validator) compiled.set(key, (validator = ajvValidator.getValidator<unknown>(schema)));
    return validator as JsonSchemaValidator<T>;
  },
};

/**
 * The official MCP SDK client, connected to `${base}/mcp` with a Bearer token (through `fetch` when
 * given); closed when the test ends.
 */
export async function mcpClient(t: TapLike, base: string, token: string, path = '/mcp', fetch?: FetchLike): Promise<Client> {
  const client = new Client({ name: 'svc-tests', version: '1.0.0' }, { jsonSchemaValidator: sharedValidator });
  const transport = new StreamableHTTPClientTransport(new URL(base + path), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
    ...(fetch ? { fetch } : {}),
  });
  await client.connect(transport);
  t.teardown(() => client.close());
  return client;
}

/** A tool result's error envelope, when it failed. */
export function toolError(result: unknown): { message: string; type: string; code: string; param: string | null } | null {
  const { isError, content } = result as CallToolResult;
  if (!isError) return null;
  const text = content.find((part) => part.type === 'text');
  return text && text.type === 'text' ? (JSON.parse(text.text) as { error: { message: string; type: string; code: string; param: string | null } }).error : null;
}
