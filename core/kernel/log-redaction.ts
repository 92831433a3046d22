/**
 * Field names whose values the process log replaces with `[redacted]`, at the top of a log line's
 * object and one level down (pino paths do not recurse; deeper values rely on SecretValue, see
 * core/services/secret-vault.ts, which prints `[secret]` wherever it ends up).
 */
const SECRET_FIELDS = [
  'authorization',
  'cookie',
  'apiKey',
  'api_key',
  'token',
  'accessToken',
  'access_token',
  'refreshToken',
  'refresh_token',
  'password',
  'pass',
  'secret',
  'clientSecret',
  'client_secret',
  'signingSecret',
  'privateKey',
  // Node's HTTP parser errors carry the bytes received so far, headers and credentials included.
  'rawPacket',
];

export const REDACTED_LOG_PATHS: string[] = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'headers["x-api-key"]',
  ...SECRET_FIELDS.flatMap((field) => [field, `*.${field}`]),
];
