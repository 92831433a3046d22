import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { quoteIdentifier } from '../../adapters/sql/script-runner.ts';

/*
 * Schemas of the real PostgreSQL for tests and the bench. Kept apart from databases.ts, which
 * imports tap: a process that imports tap becomes a TAP test with tap's timeout, so the bench
 * imports from here.
 */

export function testPgUrl(): string | undefined {
  const url = process.env.TEST_PG_URL;
  return url === undefined || url === '' ? undefined : url;
}

export function randomSchemaName(): string {
  return `t_${randomBytes(6).toString('hex')}`;
}

export async function dropSchema(url: string, schema: string): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${quoteIdentifier(schema)} CASCADE`);
  } finally {
    await client.end();
  }
}
