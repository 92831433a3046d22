// A small chat web UI over the service's models. The browser talks to this app only; the app calls
// the service's OpenAI-compatible API (SVC_BASE_URL, /v1 appended when absent) with its own key
// (SVC_API_KEY), so the key never reaches the browser. Conversations are saved as files in the app's
// storage on the service (`chats/<id>.json`, through the same key, which may act on its own app), so
// they survive restarts and redeploys; the browser keeps the open one too. No dependencies: node's
// http and fetch. APP_PASSWORD, when set, is asked for.

const http = require('node:http');

const MAX_BODY = 512 * 1024;

function api() {
  const key = process.env.SVC_API_KEY;
  const base = process.env.SVC_BASE_URL;
  if (!key || !base) return null;
  const trimmed = base.replace(/\/+$/, '');
  return { key, base: /\/v1$/.test(trimmed) ? trimmed : `${trimmed}/v1` };
}

const NOT_CONNECTED = { status: 503, body: { error: 'This app is not connected to the service: SVC_API_KEY and SVC_BASE_URL are not set' } };

/** The service's management API (its app storage): the gateway's origin with /client. */
function management() {
  const target = api();
  return target ? { key: target.key, base: `${target.base.replace(/\/v1$/, '')}/client` } : null;
}

async function upstream(path, init = {}) {
  const target = api();
  if (!target) return NOT_CONNECTED;
  return answerOf(
    await fetch(`${target.base}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${target.key}`, 'content-type': 'application/json' },
      signal: AbortSignal.timeout(120_000),
    }),
  );
}

/** A call to the management API with the app's key (headers as given: multipart sets its own type). */
async function service(path, init = {}) {
  const target = management();
  if (!target) return NOT_CONNECTED;
  return answerOf(
    await fetch(`${target.base}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${target.key}`, ...(init.headers || {}) },
      signal: AbortSignal.timeout(30_000),
    }),
  );
}

async function answerOf(response) {
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text);
  } catch {
    body = { error: text.slice(0, 1000) };
  }
  return { status: response.status, body };
}

// The app's own id, which its storage routes name: asked of the service once (whoami says which app a key belongs to).
let appId = null;
async function ownAppId() {
  if (appId) return appId;
  const { status, body } = await service('/whoami');
  if (status !== 200 || !body.credential || !body.credential.appId) throw new Error(`the service did not say which app this is (${status})`);
  appId = body.credential.appId;
  return appId;
}

const CHAT_ID = /^[A-Za-z0-9_-]{1,64}$/;
const chatFile = (id) => `chats/${id}.json`;

/** Saved conversations, newest first: [{id, title, updatedAt}]. */
async function listChats() {
  const { status, body } = await service(`/apps/${await ownAppId()}/storage`);
  if (status !== 200) return { status, body };
  const chats = (body.data || [])
    .filter((file) => file.name.startsWith('chats/') && file.name.endsWith('.json'))
    .map((file) => ({ id: file.name.slice(6, -5), updatedAt: file.updatedAt || file.createdAt || null }))
    .sort((a, b) => String(b.updatedAt).localeCompare(String(a.updatedAt)));
  return { status: 200, body: { data: chats } };
}

async function readChat(id) {
  const target = management();
  if (!target) return NOT_CONNECTED;
  const path = `/apps/${await ownAppId()}/storage?name=${encodeURIComponent(chatFile(id))}`;
  const response = await fetch(`${target.base}${path}`, {
    headers: { authorization: `Bearer ${target.key}`, accept: 'application/octet-stream' },
    signal: AbortSignal.timeout(30_000),
  });
  if (!response.ok) return answerOf(response);
  return { status: 200, body: JSON.parse(await response.text()) };
}

async function saveChat(id, chat) {
  const form = new FormData();
  form.set('name', chatFile(id));
  form.set('file', new Blob([JSON.stringify(chat)], { type: 'application/json' }), `${id}.json`);
  return service(`/apps/${await ownAppId()}/storage`, { method: 'POST', body: form });
}

async function deleteChat(id) {
  return service(`/apps/${await ownAppId()}/storage?name=${encodeURIComponent(chatFile(id))}`, { method: 'DELETE' });
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
<style>body{font:15px system-ui;max-width:960px;margin:2em auto;display:flex;gap:2em}nav{width:200px}
main{flex:1}#log p{white-space:pre-wrap}.user{color:#036}nav a{display:block;cursor:pointer}</style></head>
<body><nav><button id="new">New chat</button><div id="chats"></div></nav>
<main><h1>Chat</h1><p id="status"></p><select id="model"></select>
<div id="log"></div><form id="form"><textarea id="text" rows="3" style="width:100%"></textarea><button>Send</button></form></main>
<script>
const log = document.getElementById('log'), model = document.getElementById('model'), status = document.getElementById('status');
const fresh = () => ({ id: Date.now().toString(36) + Math.random().toString(36).slice(2, 8), messages: [] });
let chat = JSON.parse(localStorage.getItem('chat') || 'null') || fresh();
function draw() { log.innerHTML = ''; for (const m of chat.messages) { const p = document.createElement('p'); p.className = m.role; p.textContent = m.role + ': ' + m.content; log.append(p); } }
async function chats() {
  const r = await fetch('api/chats'); const b = await r.json(); const list = document.getElementById('chats'); list.innerHTML = '';
  if (!r.ok) { status.textContent = 'Conversations are not saved: ' + ((b.error && (b.error.message || b.error)) || r.status); return; }
  for (const c of b.data) { const a = document.createElement('a'); a.textContent = c.id; a.onclick = () => open(c.id); list.append(a); }
}
async function open(id) { const r = await fetch('api/chats/' + id); if (r.ok) { chat = await r.json(); localStorage.setItem('chat', JSON.stringify(chat)); draw(); } }
draw(); chats();
fetch('api/models').then((r) => r.json()).then((b) => {
  if (b.error) { status.textContent = b.error.message || b.error; return; }
  for (const m of b.data || []) { const o = document.createElement('option'); o.value = o.textContent = m.id; model.append(o); }
});
document.getElementById('new').onclick = () => { chat = fresh(); localStorage.setItem('chat', JSON.stringify(chat)); draw(); };
document.getElementById('form').onsubmit = async (e) => {
  e.preventDefault();
  const text = document.getElementById('text');
  chat.messages.push({ role: 'user', content: text.value }); text.value = ''; draw(); status.textContent = '…';
  const r = await fetch('api/chat', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: model.value, id: chat.id, messages: chat.messages }) });
  const b = await r.json();
  if (!r.ok) { status.textContent = (b.error && (b.error.message || b.error)) || r.status; return; }
  status.textContent = b.saved ? '' : 'Not saved: ' + b.saved_error;
  chat.messages.push(b.message); localStorage.setItem('chat', JSON.stringify(chat)); draw(); chats();
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
      const { model, messages, id } = await readJson(req);
      if (typeof model !== 'string' || !Array.isArray(messages) || messages.length === 0) return send(res, 400, { error: 'send {model, messages}' });
      const { status, body } = await upstream('/chat/completions', { method: 'POST', body: JSON.stringify({ model, messages }) });
      if (status !== 200) return send(res, status, body);
      const message = body.choices[0].message;
      // The conversation with its answer is saved under its id; the answer is sent even when saving fails.
      let saved = false;
      let savedError = null;
      if (typeof id === 'string' && CHAT_ID.test(id)) {
        const stored = await saveChat(id, { id, model, messages: [...messages, message] }).catch((error) => ({ status: 502, body: { error: error.message } }));
        saved = stored.status === 200 || stored.status === 201;
        if (!saved) savedError = (stored.body.error && (stored.body.error.message || stored.body.error)) || String(stored.status);
      }
      return send(res, 200, { message, usage: body.usage, saved, saved_error: savedError });
    }
    if (req.method === 'GET' && url.pathname === '/api/chats') {
      const { status, body } = await listChats();
      return send(res, status, body);
    }
    const chat = /^\/api\/chats\/([^/]+)$/.exec(url.pathname);
    if (chat) {
      if (!CHAT_ID.test(chat[1])) return send(res, 400, { error: 'a chat id is letters, digits, _ and -' });
      if (req.method === 'GET') {
        const { status, body } = await readChat(chat[1]);
        return send(res, status, body);
      }
      if (req.method === 'DELETE') {
        const { status, body } = await deleteChat(chat[1]);
        return send(res, status, body);
      }
    }
    return send(res, 404, { error: 'not found' });
  } catch (error) {
    return send(res, 502, { error: error.message });
  }
});

server.listen(Number(process.env.PORT), process.env.HOST || '127.0.0.1');
process.on('SIGTERM', () => server.close(() => process.exit(0)));
