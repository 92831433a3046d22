import t from 'tap';
import { SourceTree } from '../../../../plugins/apps/build-decision/index.ts';
import { commandShapeProblem, startCommandProblem } from '../../../../plugins/apps/build-decision/start-command.ts';
import { scratchRepository } from './fixtures.ts';

/**
 * The unfinished-start-command checks, each on its own: what is refused, what the message tells the
 * caller to change, and the complete commands that look alike but must pass.
 */
async function appTree(t: Parameters<typeof scratchRepository>[0]) {
  return SourceTree.open(
    scratchRepository(t, {
      'server.js': '',
      'src/index.ts': '',
      'lib/index.js': '',
      'api/main.py': '',
      'api/app.py': '',
      'app.py': '',
      'dist/.keep': '',
    }),
  );
}

const scripts = { start: 'node server.js', serve: 'node server.js' };

async function problem(t: Parameters<typeof scratchRepository>[0], command: string, withScripts: Record<string, string> | null = scripts) {
  return startCommandProblem(command, { tree: await appTree(t), scripts: withScripts });
}

for (const [command, expected] of [
  ['node', /runs "node" alone, which starts no app: name the file to run, like "node server\.js"/],
  ['python3', /runs "python3" alone.*like "python3 app\.py"/],
  ['npm', /runs "npm" alone.*"npm start"/],
  ['go', /runs "go" alone/],
  ['NODE_ENV=production node', /runs "node" alone/],
  ['npm ci && node', /runs "node" alone/],
] as const) {
  t.test(`a bare interpreter is refused: ${command}`, async (t) => {
    t.match(await problem(t, command), expected);
  });
}

t.test('a command ending in a folder is refused, naming a file to put there', async (t) => {
  t.equal(await problem(t, 'node dist'), 'ends in dist, which is a folder, not a file: name the file in it to run, like "node dist/index.js"');
  t.match(await problem(t, 'python api/'), /ends in api\/, which is a folder.*like "python api\/main\.py"/);
  t.match(await problem(t, 'npm ci && node src'), /ends in src, which is a folder/);
  t.match(await problem(t, 'node .'), /ends in \., which is a folder, not a file: name the file in it to run, like "node index\.js"/, 'no index.js at the top');
});

t.test('a folder node can load (an index.js in it) and python -m on a package are complete', async (t) => {
  t.equal(await problem(t, 'node lib'), null);
  t.equal(await problem(t, 'python -m api'), null);
});

t.test('an unclosed quote is refused, found by the tokenizer', async (t) => {
  t.match(await problem(t, 'node -e "console.log(1)'), /has an unclosed quote: close it/);
  t.match(await problem(t, "gunicorn 'app:app --bind 0.0.0.0:$PORT"), /has an unclosed quote/);
  t.equal(await problem(t, 'python -c "print(\'a;\')"'), null, 'quotes inside quotes are closed');
});

for (const [command, operator] of [
  ['npm run build &&', '&&'],
  ['node server.js |', '|'],
  ['node server.js;', ';'],
  ['node server.js ||', '||'],
  ['node server.js &', '&'],
] as const) {
  t.test(`a trailing operator is refused: ${operator}`, async (t) => {
    t.equal(await problem(t, command), `ends with "${operator}", so it is missing what comes after: finish the command, or remove "${operator}"`);
  });
}

t.test('a trailing backslash is refused: it continues onto no line', async (t) => {
  t.match(await problem(t, 'node server.js \\'), /ends with a backslash/);
});

t.test('a script file that is not in the tree is refused, naming it', async (t) => {
  t.equal(await problem(t, 'node index.js'), "runs index.js, which is not in the app's root directory: fix the file name, or commit the file");
  t.match(await problem(t, 'node --max-old-space-size=512 -r dotenv/config app.js'), /runs app\.js, which is not/, 'options and their values are skipped');
  t.match(await problem(t, 'python3 main.py'), /runs main\.py, which is not/);
  t.match(await problem(t, 'cd api && python server.py'), /runs server\.py, which is not in the app's root directory \(in api\)/);
  t.match(await problem(t, 'cd web && node server.js'), /changes to the folder web, which the app's root directory does not have/);
  t.match(await problem(t, 'deno run --allow-net main.ts'), /runs main\.ts, which is not/);
});

t.test('a package script that package.json does not define is refused, listing those it does', async (t) => {
  t.equal(await problem(t, 'npm run serve:prod'), 'runs the package script "serve:prod", which package.json does not define (it defines start, serve): add it, or name one it has');
  t.match(await problem(t, 'pnpm run'), /runs "pnpm run" with no script name/);
  t.match(await problem(t, 'yarn start', {}), /runs the package script "start", which package.json does not define: add it/);
  t.match(await problem(t, 'npm run start', null), /the app has no readable package\.json/);
});

t.test('npm start without a start script runs server.js, as npm does', async (t) => {
  t.equal(await problem(t, 'npm start', {}), null);
});

t.test('complete commands pass', async (t) => {
  for (const command of [
    'node server.js',
    'npm start',
    'npm run serve',
    'NODE_ENV=production exec node server.js',
    'gunicorn app:app --bind 0.0.0.0:$PORT --workers 2',
    'uvicorn api.main:app --host 0.0.0.0 --port $PORT',
    'python app.py',
    'cd api && python main.py',
    'node $ENTRY',
    './app',
    'serve -s dist',
    'go run .',
    'node -e "require(\'http\').createServer().listen(process.env.PORT)"',
  ]) {
    t.equal(await problem(t, command), null, command);
  }
});

t.test('more than 300 characters is refused, saying the length', async (t) => {
  const long = `node server.js ${'--flag '.repeat(50)}`.trim();
  t.equal(await problem(t, long), `is ${long.length} characters, over the limit of 300: put the steps in a script in the repository and run that`);
  t.equal(await problem(t, `node server.js ${'x'.repeat(300 - 15)}`), null, '300 exactly is allowed');
});

t.test('several lines are refused', async (t) => {
  t.match(await problem(t, 'npm ci\nnode server.js'), /has several lines: make it one line/);
  t.match(await problem(t, 'node server.js\r\n--port 3000'), /has several lines/);
});

t.test('the shape checks alone serve build and install commands', async (t) => {
  t.equal(commandShapeProblem('npm ci && npm run build'), null);
  t.match(commandShapeProblem('   '), /is empty/);
  t.match(commandShapeProblem('make "all'), /unclosed quote/);
});
