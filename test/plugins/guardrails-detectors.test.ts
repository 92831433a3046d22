import t from 'tap';
import { builtInDetectors, passesLuhn, patternDetector } from '../../plugins/guardrails/detectors.ts';
import { CompiledRules, type RuleSpec } from '../../plugins/guardrails/rule-evaluation.ts';

const found = (detector: keyof typeof builtInDetectors, text: string) => builtInDetectors[detector].spans(text).map(([start, end]) => text.slice(start, end));

const rule = (spec: Partial<RuleSpec> & Pick<RuleSpec, 'detector' | 'action'>): RuleSpec => ({ id: null, name: spec.name ?? spec.detector, pattern: null, ...spec });

t.test('email', async (t) => {
  t.test('finds addresses with subdomains, plus tags and country domains', async (t) => {
    t.same(found('email', 'write to jane.doe+news@mail.example.co.uk or bob@ex.io.'), ['jane.doe+news@mail.example.co.uk', 'bob@ex.io']);
  });

  t.test('finds an address next to non-ASCII text, at the right offsets', async (t) => {
    t.same(found('email', 'Grüße 😀 an zoe@beispiel.de 😀'), ['zoe@beispiel.de']);
  });

  t.test('does not take email-like strings in code for addresses', async (t) => {
    const code = ['npm install lodash@4.17.21', '@Component({ selector: "app" })', 'result = a @ b', 'ssh root@localhost', '<img src="icon@2x.png">'];
    for (const line of code) t.same(found('email', line), [], line);
  });
});

t.test('card_number', async (t) => {
  t.test('finds Luhn-valid numbers, plain or grouped by spaces or hyphens', async (t) => {
    t.same(found('card_number', 'visa 4111 1111 1111 1111, mc 5555-5555-5555-4444, amex 378282246310005'), ['4111 1111 1111 1111', '5555-5555-5555-4444', '378282246310005']);
  });

  t.test('ignores a 16-digit number that fails the Luhn check', async (t) => {
    t.notOk(passesLuhn('4111111111111112'));
    t.same(found('card_number', 'order 4111 1111 1111 1112 shipped'), []);
    t.notOk(builtInDetectors.card_number.test('order 4111111111111112 shipped'));
  });

  t.test('ignores digits inside a longer number and numbers too short to be cards', async (t) => {
    t.same(found('card_number', 'trace 411111111111111100000000 and pin 4111 1111 1111'), []);
  });
});

t.test('secret', async (t) => {
  const samples: Record<string, string> = {
    'AWS access key id': 'AKIAIOSFODNN7EXAMPLE',
    'GitHub personal token': `ghp_${'A1b2C3d4E5'.repeat(3)}abcdef`,
    'GitHub fine-grained token': `github_pat_11ABCDEFG0${'x'.repeat(12)}_${'Y7'.repeat(30)}`,
    'GitLab token': 'glpat-AbCdEfGhIjKlMnOpQrSt',
    'Slack bot token': 'xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx',
    'Slack webhook': 'https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX',
    'OpenAI project key': `sk-proj-${'Ab3_'.repeat(12)}`,
    'OpenAI user key': `sk-${'aB3dE'.repeat(9)}xyz`,
    'Anthropic key': `sk-ant-api03-${'Zz9-'.repeat(20)}AA`,
    'Stripe secret key': `sk_live_${'4eC39HqLyjWDarjtT1zdp7dc'}`,
    'Google API key': 'AIzaSyA-1234567890abcdefghijklmnopqrstu',
    'npm token': `npm_${'a1B2'.repeat(9)}`,
    'this service key': `svc_live_${'Q'.repeat(43)}`,
    JWT: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U',
    'PEM private key': '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----',
  };
  for (const [format, secret] of Object.entries(samples)) {
    t.test(`finds a ${format} in a sentence, whole`, async (t) => {
      t.same(found('secret', `here it is: ${secret} (do not share)`), [secret]);
    });
  }

  t.test('does not flag words, hashes or public key material', async (t) => {
    const benign = [
      'pip install scikit-learn; see the sk-learn-tutorial-for-beginners-2024 post',
      'commit 9fceb02d0ae598e95dc970b74767f19372d61af8',
      '-----BEGIN PUBLIC KEY-----',
      'the AKIA prefix marks AWS keys',
      'task-management-service-configuration-v2',
    ];
    for (const text of benign) t.same(found('secret', text), [], text);
  });
});

t.test('pattern', async (t) => {
  t.test('runs an RE2 expression, case-insensitive with (?i)', async (t) => {
    const detector = patternDetector('(?i)project\\s+falcon');
    t.ok(detector.test('notes on Project  FALCON'));
    t.notOk(detector.test('notes on project hawk'));
  });

  t.test('refuses expressions RE2 cannot run, and ones matching the empty string', async (t) => {
    for (const pattern of ['(unclosed', '(?=lookahead)', '(a)\\1', 'x*', '((a{100}){100}){100}']) {
      t.throws(() => patternDetector(pattern), { name: 'InvalidPattern' }, pattern);
    }
  });

  t.test('takes time linear in the text on an expression that backtracks catastrophically in JavaScript', async (t) => {
    const detector = patternDetector('(x+x+)+y');
    const text = 'x'.repeat(200_000);
    const started = performance.now();
    t.notOk(detector.test(text));
    t.same(detector.spans(text), []);
    // A backtracking engine needs longer than the age of the universe here; RE2 a few hundred ms at most.
    t.ok(performance.now() - started < 10_000);
  });
});

t.test('evaluation', async (t) => {
  t.test('no rule matching: allow', async (t) => {
    t.same(new CompiledRules([rule({ detector: 'email', action: 'block' })]).check('nothing here'), { action: 'allow' });
  });

  t.test('a redact rule replaces each match with its label', async (t) => {
    const rules = new CompiledRules([rule({ detector: 'email', action: 'redact', name: 'emails' })]);
    t.same(rules.check('from a@example.com to b@example.org'), { action: 'redact', rule: 'emails', text: 'from [REDACTED:email] to [REDACTED:email]' });
  });

  t.test("a pattern rule redacts to its rule's name", async (t) => {
    const rules = new CompiledRules([rule({ detector: 'pattern', pattern: 'FALCON-\\d+', action: 'redact', name: 'codename' })]);
    t.same(rules.check('ticket FALCON-42 is late'), { action: 'redact', rule: 'codename', text: 'ticket [REDACTED:codename] is late' });
  });

  t.test('block wins over redact, whatever their order', async (t) => {
    const rules = new CompiledRules([
      rule({ detector: 'email', action: 'redact', name: 'emails' }),
      rule({ detector: 'pattern', pattern: 'secret@corp\\.example', action: 'block', name: 'corp mailbox' }),
    ]);
    t.same(rules.check('mail secret@corp.example now'), { action: 'block', rule: 'corp mailbox' });
    t.equal(rules.evaluate('mail secret@corp.example now').decision.action, 'block');
  });

  t.test('every kind of rule is found by the call path, case-insensitive patterns included', async (t) => {
    const rules = new CompiledRules([rule({ detector: 'pattern', pattern: '(?i)project\\s+falcon', action: 'redact', name: 'codename' }), rule({ detector: 'secret', action: 'block' })]);
    t.same(rules.check('PROJECT  Falcon, project falcon'), { action: 'redact', rule: 'codename', text: '[REDACTED:codename], [REDACTED:codename]' });
    t.same(rules.check('token ghp_abcdefghijklmnopqrstuvwxyz0123456789'), { action: 'block', rule: 'secret' });
    t.same(rules.check('project hawk, token ghp_short'), { action: 'allow' });
  });

  t.test('a redact rule does not redact the label an earlier one left', async (t) => {
    const rules = new CompiledRules([rule({ detector: 'email', action: 'redact' }), rule({ detector: 'pattern', pattern: 'REDACTED', action: 'redact', name: 'shouting' })]);
    t.same(rules.check('a@b.io'), { action: 'redact', rule: 'email', text: '[REDACTED:email]' });
    t.same(rules.evaluate('a@b.io').decision, rules.check('a@b.io'), 'the test route answers what the call path does');
  });

  t.test('redact rules apply one after the other; the first to redact is named', async (t) => {
    const rules = new CompiledRules([rule({ detector: 'email', action: 'redact' }), rule({ detector: 'card_number', action: 'redact' })]);
    const result = rules.evaluate('a@b.io paid with 4242 4242 4242 4242');
    t.same(result.decision, { action: 'redact', rule: 'email', text: '[REDACTED:email] paid with [REDACTED:card_number]' });
    t.same(
      result.findings.map((f) => [f.rule.name, f.matches]),
      [
        ['email', 1],
        ['card_number', 1],
      ],
    );
  });
});
