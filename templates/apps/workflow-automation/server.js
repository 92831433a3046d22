// A small workflow-automation app: workflows are lists of steps run when their webhook is called
// (POST /hooks/<id>) or on a schedule (everySeconds). Steps: http (call a URL), set (store a value
// in the run's state), log, delay. Workflows come from workflows.json and from POST /api/workflows;
// the latter and the run history live in memory (a restart keeps only workflows.json).
// No dependencies: node's http and fetch. APP_PASSWORD, when set, is asked for (HTTP Basic).

const http = require('node:http');
const fs = require('node:fs');
const path = require('node:path');

const MAX_BODY = 256 * 1024;
const MAX_RUNS = 200;
const MAX_DELAY_MS = 10_000;
const workflows = new Map();
const timers = new Map();
const runs = [];

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

function send(res, status, body, type = 'application/json') {
  res.writeHead(status, { 'content-type': type });
  res.end(type === 'application/json' ? JSON.stringify(body) : body);
}

function readJson(req) {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks = [];
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new Error('body too large'));
        req.destroy();
      } else chunks.push(chunk);
    });
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      try {
        resolve(text ? JSON.parse(text) : {});
      } catch {
        reject(new Error('the body is not JSON'));
      }
    });
  });
}

function allowed(req) {
  const password = process.env.APP_PASSWORD;
  if (!password) return true;
  const [scheme, value] = String(req.headers.authorization || '').split(' ');
  if (scheme !== 'Basic' || !value) return false;
  const given = Buffer.from(value, 'base64').toString('utf8');
  return given.slice(given.indexOf(':') + 1) === password;
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
  if (url.pathname === '/healthz') return send(res, 200, { ok: true });
  if (!allowed(req)) {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="workflows"', 'content-type': 'text/plain' });
    return res.end('password required\n');
  }
  try {
    if (req.method === 'GET' && url.pathname === '/') return send(res, 200, page(), 'text/html; charset=utf-8');
    if (req.method === 'GET' && url.pathname === '/api/workflows') return send(res, 200, { data: [...workflows.values()] });
    if (req.method === 'GET' && url.pathname === '/api/runs') return send(res, 200, { data: runs });
    if (req.method === 'POST' && url.pathname === '/api/workflows') {
      const workflow = await readJson(req);
      const problem = validWorkflow(workflow);
      if (problem) return send(res, 400, { error: problem });
      define(workflow);
      return send(res, 201, workflow);
    }
    const hook = /^\/hooks\/([a-z0-9-]{1,40})$/.exec(url.pathname);
    if (req.method === 'POST' && hook) {
      const workflow = workflows.get(hook[1]);
      if (!workflow) return send(res, 404, { error: `no workflow ${hook[1]}` });
      return send(res, 200, await run(workflow, await readJson(req)));
    }
    return send(res, 404, { error: 'not found' });
  } catch (error) {
    return send(res, 400, { error: error.message });
  }
});

for (const workflow of JSON.parse(fs.readFileSync(path.join(__dirname, 'workflows.json'), 'utf8'))) {
  const problem = validWorkflow(workflow);
  if (problem) throw new Error(`workflows.json: ${workflow?.id}: ${problem}`);
  define(workflow);
}
server.listen(Number(process.env.PORT), process.env.HOST || '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
