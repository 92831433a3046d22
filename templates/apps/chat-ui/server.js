// A small chat web UI over the service's models. The browser talks to this app only; the app calls
// the service's OpenAI-compatible API (SVC_BASE_URL, /v1 appended when absent) with its own key
// (SVC_API_KEY), so the key never reaches the browser. Conversations are kept in the browser
// (localStorage). No dependencies: node's http and fetch. APP_PASSWORD, when set, is asked for.

const http = require('node:http');

const MAX_BODY = 512 * 1024;

function api() {
  const key = process.env.SVC_API_KEY;
  const base = process.env.SVC_BASE_URL;
  if (!key || !base) return null;
  const trimmed = base.replace(/\/+$/, '');
  return { key, base: /\/v1$/.test(trimmed) ? trimmed : `${trimmed}/v1` };
}

async function upstream(path, init = {}) {
  const target = api();
  if (!target) return { status: 503, body: { error: 'This app is not connected to the service: SVC_API_KEY and SVC_BASE_URL are not set' } };
  const response = await fetch(`${target.base}${path}`, {
    ...init,
    headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json' },
    signal: AbortSignal.timeout(120_000),
  });
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: text.slice(0, 1000) };
  }
  return { status: response.status, body };
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
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'));
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

const PAGE = `<!doctype html><html><head><meta charset="utf-8"><title>Chat</title>
<style>body{font:15px system-ui;max-width:760px;margin:2em auto}#log p{white-space:pre-wrap}.user{color:#036}</style></head>
<body><h1>Chat</h1><p id="status"></p><select id="model"></select> <button id="clear">New chat</button>
<div id="log"></div><form id="form"><textarea id="text" rows="3" style="width:100%"></textarea><button>Send</button></form>
<script>
const log = document.getElementById('log'), model = document.getElementById('model'), status = document.getElementById('status');
let messages = JSON.parse(localStorage.getItem('chat') || '[]');
function draw() { log.innerHTML = ''; for (const m of messages) { const p = document.createElement('p'); p.className = m.role; p.textContent = m.role + ': ' + m.content; log.append(p); } }
draw();
fetch('api/models').then((r) => r.json()).then((b) => {
  if (b.error) { status.textContent = b.error; return; }
  for (const m of b.data || []) { const o = document.createElement('option'); o.value = o.textContent = m.id; model.append(o); }
});
document.getElementById('clear').onclick = () => { messages = []; localStorage.setItem('chat', '[]'); draw(); };
document.getElementById('form').onsubmit = async (e) => {
  e.preventDefault();
  const text = document.getElementById('text');
  messages.push({ role: 'user', content: text.value }); text.value = ''; draw(); status.textContent = '…';
  const r = await fetch('api/chat', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: model.value, messages }) });
  const b = await r.json();
  if (!r.ok) { status.textContent = (b.error && (b.error.message || b.error)) || r.status; return; }
  status.textContent = '';
  messages.push(b.message); localStorage.setItem('chat', JSON.stringify(messages)); draw();
};
</script></body></html>`;

const server = http.createServer(async (req, res) => {
  const url = new URL(req.url, 'http://app');
  if (url.pathname === '/healthz') return send(res, 200, { ok: true, connected: api() !== null });
  if (!allowed(req)) {
    res.writeHead(401, { 'www-authenticate': 'Basic realm="chat"', 'content-type': 'text/plain' });
    return res.end('password required\n');
  }
  try {
    if (req.method === 'GET' && url.pathname === '/') return send(res, 200, PAGE, 'text/html; charset=utf-8');
    if (req.method === 'GET' && url.pathname === '/api/models') {
      const { status, body } = await upstream('/models');
      return send(res, status, body);
    }
    if (req.method === 'POST' && url.pathname === '/api/chat') {
      const { model, messages } = await readJson(req);
      if (typeof model !== 'string' || !Array.isArray(messages) || messages.length === 0) return send(res, 400, { error: 'send {model, messages}' });
      const { status, body } = await upstream('/chat/completions', { method: 'POST', body: JSON.stringify({ model, messages }) });
      if (status !== 200) return send(res, status, body);
      return send(res, 200, { message: body.choices[0].message, usage: body.usage });
    }
    return send(res, 404, { error: 'not found' });
  } catch (error) {
    return send(res, 502, { error: error.message });
  }
});

server.listen(Number(process.env.PORT), process.env.HOST || '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
