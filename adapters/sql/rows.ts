/** Small helpers for mapping rows; columns come back snake_case. */
export type Row = Record<string, unknown>;

export const str = (row: Row, column: string): string => row[column] as string;
export const strOrNull = (row: Row, column: string): string | null => (row[column] as string | null) ?? null;
export const date = (row: Row, column: string): Date => row[column] as Date;
export const dateOrNull = (row: Row, column: string): Date | null => (row[column] as Date | null) ?? null;
export const bool = (row: Row, column: string): boolean => row[column] as boolean;
export const strings = (row: Row, column: string): string[] | null => (row[column] as string[] | null) ?? null;
export const bigintOrNull = (row: Row, column: string): bigint | null => {
  const value = row[column];
  return value === null || value === undefined ? null : BigInt(value as bigint | string | number);
};
export const bigintOf = (row: Row, column: string): bigint => bigintOrNull(row, column) ?? 0n;

/** The three spend_cap_* columns as one value. */
export const spendCapOf = (row: Row): import('../../core/ports/identity.ts').SpendCap | null => {
  const limit = bigintOrNull(row, 'spend_cap_micros');
  if (limit === null) return null;
  return {
    limitMicros: limit,
    period: row['spend_cap_period'] as import('../../core/ports/identity.ts').SpendPeriod,
    mode: row['spend_cap_mode'] as import('../../core/ports/identity.ts').CapMode,
  };
};

const intOrNull = (row: Row, column: string): number | null => (row[column] === null || row[column] === undefined ? null : Number(row[column]));

export const rateLimitsOf = (row: Row): import('../../core/ports/identity.ts').KeyRateLimits => ({
  requestsPerMinute: intOrNull(row, 'rpm_limit'),
  tokensPerMinute: intOrNull(row, 'tpm_limit'),
  concurrency: intOrNull(row, 'concurrency_limit'),
});

/** A bytea value as a Buffer: pg returns one, PGlite a Uint8Array. */
export const bytesOf = (value: unknown): Buffer => {
  const bytes = value as Uint8Array;
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
};
