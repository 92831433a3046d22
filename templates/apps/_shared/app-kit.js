// What both templates need from the service and from HTTP, copied into each template's folder when
// an app is made from it (plugins/apps/app-sources.ts), so the app stays one folder with no
// dependencies. The service gives every app SVC_API_KEY (its own key, scope `inference`) and
// SVC_BASE_URL; that key may also read and write its own app's storage (`/client/apps/<id>/storage`).

const NOT_CONNECTED = { status: 503, body: { error: 'This app is not connected to the service: SVC_API_KEY and SVC_BASE_URL are not set' } };

/** The service's OpenAI-compatible API: SVC_BASE_URL with /v1 (appended when absent); null when not connected. */
function inferenceApi() {
  const key = process.env.SVC_API_KEY;
  const base = process.env.SVC_BASE_URL;
  if (!key || !base) return null;
  const trimmed = base.replace(/\/+$/, '');
  return { key, base: /\/v1$/.test(trimmed) ? trimmed : `${trimmed}/v1` };
}

/** The service's management API (its app storage): the gateway's origin with /client. */
function managementApi() {
  const target = inferenceApi();
  return target ? { key: target.key, base: `${target.base.replace(/\/v1$/, '')}/client` } : null;
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

async function call(target, path, init, timeoutMs) {
  if (!target) return NOT_CONNECTED;
  return answerOf(
    await fetch(`${target.base}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${target.key}`, ...(init.headers || {}) },
      signal: AbortSignal.timeout(timeoutMs),
    }),
  );
}

/** A call to /v1 with the app's key, JSON both ways: {status, body}. */
function inference(path, init = {}) {
  return call(inferenceApi(), path, { ...init, headers: { 'content-type': 'application/json', ...(init.headers || {}) } }, 120_000);
}

/** A call to the management API with the app's key (headers as given: multipart sets its own type). */
function management(path, init = {}) {
  return call(managementApi(), path, init, 30_000);
}

// The app's own id, which its storage routes name: asked of the service once (whoami says which app a key belongs to).
let appId = null;
async function ownAppId() {
  if (appId) return appId;
  const { status, body } = await management('/whoami');
  if (status !== 200 || !body.credential || !body.credential.appId) throw new Error(`the service did not say which app this is (${status})`);
  appId = body.credential.appId;
  return appId;
}

/**
 * The app's storage on the service, JSON documents by name: list(prefix) answers [{name, updatedAt}]
 * newest first; read(name) the parsed document; write(name, value); remove(name). Each answers
 * {status, body} as the service did (503 when not connected); read's body is the document on 200.
 */
const storage = {
  async list(prefix) {
    const { status, body } = await management(`/apps/${await ownAppId()}/storage`);
    if (status !== 200) return { status, body };
    const files = (body.data || [])
      .filter((file) => file.name.startsWith(prefix))
      .map((file) => ({ name: file.name, updatedAt: file.updatedAt || file.createdAt || null }))
      .sort((a, b) => String(b.updatedAt).localeCompare(String(a.updatedAt)));
    return { status: 200, body: { data: files } };
  },
  async read(name) {
    // The file's own bytes (a document saved by write), parsed as any answer is.
    return management(`/apps/${await ownAppId()}/storage?name=${encodeURIComponent(name)}`, { headers: { accept: 'application/octet-stream' } });
  },
  async write(name, value) {
    const form = new FormData();
    form.set('name', name);
    form.set('file', new Blob([JSON.stringify(value)], { type: 'application/json' }), name.slice(name.lastIndexOf('/') + 1));
    return management(`/apps/${await ownAppId()}/storage`, { method: 'POST', body: form });
  },
  async remove(name) {
    return management(`/apps/${await ownAppId()}/storage?name=${encodeURIComponent(name)}`, { method: 'DELETE' });
  },
};

/** Whether the service did what it was asked (any 2xx). */
const succeeded = (answer) => answer.status >= 200 && answer.status < 300;

/** The service's error as one line, whatever its shape. */
function errorText(answer) {
  const error = answer.body?.error;
  return (error && (error.message || error)) || String(answer.status);
}

function send(res, status, body, type = 'application/json') {
  res.writeHead(status, { 'content-type': type });
  res.end(type === 'application/json' ? JSON.stringify(body) : body);
}

function readJson(req, maxBytes) {
  return new Promise((resolve, reject) => {
    let size = 0;
    const chunks = [];
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > maxBytes) {
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

/**
 * The template's protection: with APP_PASSWORD set, every page but /healthz asks for it (HTTP Basic,
 * any user name). Answers true when the request may go on; else it has answered 401.
 */
function passwordGate(req, res, realm) {
  const password = process.env.APP_PASSWORD;
  if (!password) return true;
  const [scheme, value] = String(req.headers.authorization || '').split(' ');
  if (scheme === 'Basic' && value) {
    const given = Buffer.from(value, 'base64').toString('utf8');
    if (given.slice(given.indexOf(':') + 1) === password) return true;
  }
  res.writeHead(401, { 'www-authenticate': `Basic realm="${realm}"`, 'content-type': 'text/plain' });
  res.end('password required\n');
  return false;
}

module.exports = { connected: () => inferenceApi() !== null, inference, storage, succeeded, errorText, send, readJson, passwordGate };
