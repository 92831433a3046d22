import { createConfig, lintFromString } from '@redocly/openapi-core';
import spectralCore, { type RulesetDefinition } from '@stoplight/spectral-core';
import spectralParsers from '@stoplight/spectral-parsers';
import { oas } from '@stoplight/spectral-rulesets';
import t from 'tap';
import { buildOpenApiDocument } from '../../core/kernel/openapi.ts';
import { Tokens } from '../../core/kernel/di-tokens.ts';
import { buildTestApp } from '../helpers/app.ts';

/*
 * The lint gate of the OpenAPI documents: both served documents (and the /client one as a
 * deployment with server.publicUrl would serve it) pass Redocly's `recommended` ruleset and
 * Spectral's `oas` ruleset (its recommended rules) with no finding at all, errors and warnings
 * alike. A failure lists every finding, by rule and location.
 *
 * Before the document had named components, tags and servers it had, per document, 1 Redocly error
 * (no-empty-servers), 1 Redocly warning (info-license) and 51 Spectral warnings (operation-tag-defined 32,
 * operation-description 17, oas3-api-servers 1, info-contact 1).
 */

// CommonJS packages: their named exports are read from the default export under ESM.
const { Spectral, Document } = spectralCore;
const { Json } = spectralParsers;

const spectral = new Spectral();
spectral.setRuleset({
  // The package's declared type of its own ruleset is narrower than what it exports.
  extends: [[oas as RulesetDefinition, 'recommended']],
  rules: {
    // The service is self-hosted: whom to contact is the operator's, which the document cannot know.
    'info-contact': 'off',
  },
});
const redoclyConfig = await createConfig({ extends: ['recommended'] });
const SEVERITY = ['error', 'warning', 'info', 'hint'];

async function findings(source: string, name: string): Promise<string[]> {
  const out: string[] = [];
  for (const problem of await lintFromString({ source, absoluteRef: name, config: redoclyConfig })) {
    // The spec names both /apps/templates/{template} and /apps/{id}/<action>: the router takes the literal
    // `templates` first, so they resolve; that one overlap, which the wire contract fixes, is not a finding.
    if (problem.ruleId === 'no-ambiguous-paths' && problem.message.includes('`/apps/templates/{template}`')) continue;
    const where = problem.location.map((location) => location.pointer).join(', ');
    out.push(`redocly ${problem.severity} ${problem.ruleId} at ${where}: ${problem.message}`);
  }
  for (const result of await spectral.run(new Document(source, Json, name))) {
    out.push(`spectral ${SEVERITY[result.severity] ?? result.severity} ${String(result.code)} at #/${result.path.join('/')}: ${result.message}`);
  }
  return out;
}

const test = await buildTestApp(t);

for (const url of ['/client/openapi.json', '/platform/v1/openapi.json']) {
  t.test(`${url} has no Redocly or Spectral finding`, async (t) => {
    const response = await test.call('GET', url, { token: null });
    t.equal(response.statusCode, 200);
    t.same(await findings(response.body, url), []);
  });
}

t.test('the document of a deployment with server.publicUrl has no finding either', async (t) => {
  const registry = test.app.svc.container.resolve(Tokens.Operations);
  const document = buildOpenApiDocument(registry.list(), { prefix: '/client', publicUrl: 'https://gateway.svc.test/', ownerOf: (name) => registry.ownerOf(name) });
  t.same(
    document.servers.map((server) => server.url),
    ['/client', 'https://gateway.svc.test/client'],
  );
  t.same(await findings(JSON.stringify(document), 'public-url.json'), []);
});
