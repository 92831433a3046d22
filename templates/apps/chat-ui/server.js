// A small chat web UI over the service's models. The browser talks to this app only; the app calls
// the service's OpenAI-compatible API (SVC_BASE_URL, /v1 appended when absent) with its own key
// (SVC_API_KEY), so the key never reaches the browser. Conversations are saved as files in the app's
// storage on the service (`chats/<id>.json`, through the same key, which may act on its own app), so
// they survive restarts and redeploys; the browser keeps the open one too. No dependencies: node's
// http and fetch. APP_PASSWORD, when set, is asked for.

const http = require('node:http');
const { connected, errorText, inference, passwordGate, readJson, send, storage, succeeded } = require('./app-kit.js');

const MAX_BODY = 512 * 1024;

const CHAT_ID = /^[A-Za-z0-9_-]{1,64}$/;
const chatFile = (id) => `chats/${id}.json`;

/** Saved conversations, newest first: [{id, updatedAt}]. */
async function listChats() {
  const { status, body } = await storage.list('chats/');
  if (status !== 200) return { status, body };
  const chats = body.data.filter((file) => file.name.endsWith('.json')).map((file) => ({ id: file.name.slice(6, -5), updatedAt: file.updatedAt }));
  return { status: 200, body: { data: chats } };
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
  if (url.pathname === '/healthz') return send(res, 200, { ok: true, connected: connected() });
  if (!passwordGate(req, res, 'chat')) return;
  try {
    if (req.method === 'GET' && url.pathname === '/') return send(res, 200, PAGE, 'text/html; charset=utf-8');
    if (req.method === 'GET' && url.pathname === '/api/models') {
      const { status, body } = await inference('/models');
      return send(res, status, body);
    }
    if (req.method === 'POST' && url.pathname === '/api/chat') {
      const { model, messages, id } = await readJson(req, MAX_BODY);
      if (typeof model !== 'string' || !Array.isArray(messages) || messages.length === 0) return send(res, 400, { error: 'send {model, messages}' });
      const { status, body } = await inference('/chat/completions', { method: 'POST', body: JSON.stringify({ model, messages }) });
      if (status !== 200) return send(res, status, body);
      const message = body.choices[0].message;
      // The conversation with its answer is saved under its id; the answer is sent even when saving fails.
      let saved = false;
      let savedError = null;
      if (typeof id === 'string' && CHAT_ID.test(id)) {
        const stored = await storage.write(chatFile(id), { id, model, messages: [...messages, message] }).catch((error) => ({ status: 502, body: { error: error.message } }));
        saved = succeeded(stored);
        if (!saved) savedError = errorText(stored);
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
        const { status, body } = await storage.read(chatFile(chat[1]));
        return send(res, status, body);
      }
      if (req.method === 'DELETE') {
        const { status, body } = await storage.remove(chatFile(chat[1]));
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
