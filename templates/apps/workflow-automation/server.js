// A small workflow-automation app: workflows are lists of steps run when their webhook is called
// (POST /hooks/<id>) or on a schedule (everySeconds). Steps: http (call a URL), set (store a value
// in the run's state), log, delay. Workflows come from workflows.json (built in) and from
// POST /api/workflows, which saves each as `workflows/<id>.json` in the app's storage on the
// service (through its own key, SVC_API_KEY), so they survive restarts and redeploys; DELETE
// /api/workflows/<id> removes one. The run history (the last 200) is kept in memory only.
// No dependencies: node's http and fetch, and app-kit.js. APP_PASSWORD, when set, is asked for.

const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');
const { connected, errorText, passwordGate, readJson, send, storage, succeeded } = require('./app-kit.js');

const MAX_BODY = 256 * 1024;
const MAX_RUNS = 200;
const MAX_DELAY_MS = 10_000;
const STORED_PREFIX = 'workflows/';
const RELOAD_EVERY_MS = 5_000;
const workflows = new Map();
/** The ids workflows.json defines: built in, not removable through the API. */
const builtIn = new Set();
const timers = new Map();
const runs = [];
/** Whether the stored workflows are in: 'loading' until the service answered, 'loaded', or 'not connected'. */
let stored = connected() ? 'loading' : 'not connected';

function template(text, scope) {
  return String(text).replace(/\{\{\s*([\w.]+)\s*\}\}/g, (_, key) => {
    if (key === 'now') return new Date().toISOString();
    let value = scope;
    for (const part of key.split('.')) value = value == null ? undefined : value[part];
    return value == null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
  });
}

function validWorkflow(workflow) {
  if (!workflow || typeof workflow.id !== 'string' || !/^[a-z0-9-]{1,40}$/.test(workflow.id)) return 'id: 1 to 40 of a-z, 0-9, -';
  if (!Array.isArray(workflow.steps) || workflow.steps.length === 0 || workflow.steps.length > 20) return 'steps: 1 to 20';
  for (const step of workflow.steps) {
    if (!['http', 'set', 'log', 'delay'].includes(step?.type)) return `unknown step type ${step?.type}`;
    if (step.type === 'http' && !/^https?:\/\//.test(String(step.url))) return 'http steps need an http(s) url';
  }
  if (workflow.everySeconds !== undefined && !(Number.isInteger(workflow.everySeconds) && workflow.everySeconds >= 10)) return 'everySeconds: an integer, at least 10';
  return null;
}

function define(workflow) {
  clearInterval(timers.get(workflow.id));
  workflows.set(workflow.id, workflow);
  if (workflow.everySeconds) timers.set(workflow.id, setInterval(() => run(workflow, { trigger: 'schedule' }), workflow.everySeconds * 1000).unref());
}

function forget(id) {
  clearInterval(timers.get(id));
  timers.delete(id);
  workflows.delete(id);
}

const storedName = (id) => `${STORED_PREFIX}${id}.json`;

/** Reads the saved workflows from storage, trying again every few seconds while the service does not answer. */
async function loadStored() {
  try {
    const listed = await storage.list(STORED_PREFIX);
    if (!succeeded(listed)) throw new Error(errorText(listed));
    for (const file of listed.body.data) {
      const read = await storage.read(file.name);
      const problem = succeeded(read) ? validWorkflow(read.body) : errorText(read);
      if (problem) console.error(`${file.name}: not loaded: ${problem}`);
      else if (!builtIn.has(read.body.id) && !workflows.has(read.body.id)) define(read.body);
    }
    stored = 'loaded';
  } catch (error) {
    console.error(`stored workflows not loaded yet (${error.message}); trying again in ${RELOAD_EVERY_MS / 1000}s`);
    setTimeout(loadStored, RELOAD_EVERY_MS).unref();
  }
}

async function run(workflow, input) {
  const record = { id: `${Date.now().toString(36)}-${runs.length}`, workflow: workflow.id, startedAt: new Date().toISOString(), status: 'running', log: [], state: {} };
  runs.unshift(record);
  runs.length = Math.min(runs.length, MAX_RUNS);
  const scope = { input, state: record.state };
  try {
    for (const step of workflow.steps) {
      if (step.type === 'set') record.state[step.key] = template(step.value, scope);
      else if (step.type === 'log') record.log.push(template(step.message, scope));
      else if (step.type === 'delay') await new Promise((resolve) => setTimeout(resolve, Math.min(Number(step.ms) || 0, MAX_DELAY_MS)));
      else if (step.type === 'http') {
        const response = await fetch(template(step.url, scope), {
          method: step.method || 'GET',
          headers: step.body === undefined ? {} : { 'content-type': 'application/json' },
          body: step.body === undefined ? undefined : template(JSON.stringify(step.body), scope),
          signal: AbortSignal.timeout(15_000),
        });
        const text = await response.text();
        record.state[step.saveAs || 'response'] = { status: response.status, body: text.slice(0, 10_000) };
        record.log.push(`${step.method || 'GET'} ${step.url}: ${response.status}`);
        if (!response.ok && !step.continueOnError) throw new Error(`${step.url} answered ${response.status}`);
      }
    }
    record.status = 'succeeded';
  } catch (error) {
    record.status = 'failed';
    record.error = error.message;
  }
  record.finishedAt = new Date().toISOString();
  return record;
}

const escapeHtml = (text) => String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]);

function page() {
  const rows = [...workflows.values()].map(
    (w) => `<li><b>${escapeHtml(w.id)}</b> ${escapeHtml(w.description || '')} — POST /hooks/${escapeHtml(w.id)}${w.everySeconds ? `, every ${w.everySeconds}s` : ''}</li>`,
  );
  const recent = runs.slice(0, 20).map((r) => `<li>${escapeHtml(r.startedAt)} ${escapeHtml(r.workflow)}: ${escapeHtml(r.status)}${r.error ? ` (${escapeHtml(r.error)})` : ''}</li>`);
  return `<!doctype html><html><head><meta charset="utf-8"><title>Workflow automation</title></head><body>
<h1>Workflow automation</h1><h2>Workflows</h2><ul>${rows.join('')}</ul><h2>Recent runs</h2><ul>${recent.join('') || '<li>none yet</li>'}</ul></body></html>`;
}

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://app');
  if (url.pathname === '/healthz') return send(res, 200, { ok: true, stored });
  if (!passwordGate(req, res, 'workflows')) return;
  try {
    if (req.method === 'GET' && url.pathname === '/') return send(res, 200, page(), 'text/html; charset=utf-8');
    if (req.method === 'GET' && url.pathname === '/api/workflows') {
      return send(res, 200, { data: [...workflows.values()].map((workflow) => ({ ...workflow, builtIn: builtIn.has(workflow.id) })), stored });
    }
    if (req.method === 'GET' && url.pathname === '/api/runs') return send(res, 200, { data: runs });
    if (req.method === 'POST' && url.pathname === '/api/workflows') {
      const workflow = await readJson(req, MAX_BODY);
      const problem = validWorkflow(workflow);
      if (problem) return send(res, 400, { error: problem });
      if (builtIn.has(workflow.id)) return send(res, 409, { error: `${workflow.id} is defined in workflows.json` });
      // Saved first: a workflow the service could not keep is not defined either.
      const saved = await storage.write(storedName(workflow.id), workflow);
      if (!succeeded(saved)) return send(res, saved.status >= 500 ? saved.status : 502, { error: `not saved: ${errorText(saved)}` });
      define(workflow);
      return send(res, 201, workflow);
    }
    const one = /^\/api\/workflows\/([a-z0-9-]{1,40})$/.exec(url.pathname);
    if (req.method === 'DELETE' && one) {
      if (builtIn.has(one[1])) return send(res, 409, { error: `${one[1]} is defined in workflows.json` });
      if (!workflows.has(one[1])) return send(res, 404, { error: `no workflow ${one[1]}` });
      const removed = await storage.remove(storedName(one[1]));
      if (!succeeded(removed) && removed.status !== 404) return send(res, 502, { error: `not removed: ${errorText(removed)}` });
      forget(one[1]);
      return send(res, 200, { id: one[1], deleted: true });
    }
    const hook = /^\/hooks\/([a-z0-9-]{1,40})$/.exec(url.pathname);
    if (req.method === 'POST' && hook) {
      const workflow = workflows.get(hook[1]);
      if (!workflow) return send(res, 404, { error: `no workflow ${hook[1]}` });
      return send(res, 200, await run(workflow, await readJson(req, MAX_BODY)));
    }
    return send(res, 404, { error: 'not found' });
  } catch (error) {
    return send(res, 400, { error: error.message });
  }
});

for (const workflow of JSON.parse(fs.readFileSync(path.join(__dirname, 'workflows.json'), 'utf8'))) {
  const problem = validWorkflow(workflow);
  if (problem) throw new Error(`workflows.json: ${workflow?.id}: ${problem}`);
  builtIn.add(workflow.id);
  define(workflow);
}
server.listen(Number(process.env.PORT), process.env.HOST || '127.0.0.1');
if (connected()) void loadStored();
process.on('SIGTERM', () => server.close(() => process.exit(0)));
