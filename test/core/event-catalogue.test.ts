import { readFileSync } from 'node:fs';
import t from 'tap';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { defineEventTypes, eventTypeEntries, eventTypeEntry, isPublicEventType } from '../../core/events/event-catalogue.ts';
import { buildTestApp, createKey } from '../helpers/app.ts';

interface EventTypeView {
  object: string;
  type: string;
  description: string;
  schema: Record<string, unknown>;
  example: unknown;
}

t.test('a type another owner declared is refused', async (t) => {
  const entry = { schema: z.object({ id: z.string() }), description: 'Once', public: false, example: { id: 'a' } };
  defineEventTypes('first', { 'catalogue_test.once': entry });
  t.throws(() => defineEventTypes('second', { 'catalogue_test.once': { ...entry, description: 'Twice' } }), /catalogue_test\.once of second is already declared by first/);
  t.equal(eventTypeEntry('catalogue_test.once').description, 'Once', 'the first declaration stands');
});

t.test('an example its own schema rejects is refused', async (t) => {
  t.throws(
    () =>
      defineEventTypes('tests', {
        'catalogue_test.bad_example': { schema: z.object({ n: z.number() }), description: 'x', public: false, example: { n: 'one' } },
      }),
    /example of event type catalogue_test\.bad_example does not match its schema/,
  );
  t.throws(() => eventTypeEntry('catalogue_test.bad_example'), /not declared/);
});

t.test('a type not of the form noun.verb is refused', async (t) => {
  t.throws(() => defineEventTypes('tests', { KeyCreated: { schema: z.object({}), description: 'x', public: false, example: {} } }), /not of the form noun\.verb/);
});

t.test('GET /client/events/types', async (t) => {
  const test = await buildTestApp(t);

  t.test('lists every public type of the service with its description, JSON Schema and an example', async (t) => {
    const response = await test.call('GET', '/client/events/types');
    t.equal(response.statusCode, 200);
    const body = response.json() as { object: string; data: EventTypeView[] };
    t.equal(body.object, 'list');
    const types = body.data.map((item) => item.type);
    for (const type of ['key.created', 'key.updated', 'key.disabled', 'key.revoked', 'payment.recorded', 'budget.threshold_reached']) {
      t.ok(types.includes(type), `${type} is listed`);
    }
    t.same(types, [...types].sort(), 'by name');
    const publicTypes = eventTypeEntries()
      .filter(({ entry }) => entry.public)
      .map(({ type }) => type);
    t.same(types, publicTypes, 'exactly the public types');
    for (const item of body.data) {
      t.equal(item.object, 'event_type');
      t.ok(item.description.length > 0, `${item.type} is described`);
      const validate = new Ajv2020({ strict: false }).compile(item.schema);
      t.ok(validate(item.example), `${item.type}: the example matches the JSON Schema listed with it`);
    }
  });

  t.test('does not list the internal types', async (t) => {
    const types = ((await test.call('GET', '/client/events/types')).json() as { data: EventTypeView[] }).data.map((item) => item.type);
    t.notOk(isPublicEventType('management.operation'));
    t.notOk(types.includes('management.operation'), 'the audit record stays inside');
  });

  t.test('answers a key holding webhooks:read, and refuses one without it', async (t) => {
    const reader = await createKey(test, { name: 'reader', scopes: ['webhooks:read'] });
    t.equal((await test.call('GET', '/client/events/types', { token: reader.key })).statusCode, 200);
    const other = await createKey(test, { name: 'other', scopes: ['keys:read'] });
    const refused = await test.call('GET', '/client/events/types', { token: other.key });
    t.equal(refused.statusCode, 403);
    t.equal(refused.json().error.code, 'missing_scope');
  });

  t.test('is documented in the OpenAPI document', async (t) => {
    const document = (await test.call('GET', '/client/openapi.json', { token: null })).json() as { paths: Record<string, Record<string, unknown>> };
    t.ok(document.paths['/events/types']?.['get'], 'GET /events/types, relative to /client');
  });
});

t.test('the README lists every public type with its example', async (t) => {
  // test/helpers/app.ts imports every plugin, so every type of the service is declared here.
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  for (const { type, entry } of eventTypeEntries().filter(({ entry }) => entry.public)) {
    t.ok(readme.includes(`| \`${type}\` |`), `${type} is in the table`);
    t.ok(readme.includes(`\`${JSON.stringify(entry.example)}\``), `${type}: its example as declared`);
  }
});
