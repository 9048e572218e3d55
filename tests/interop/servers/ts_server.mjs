// An official TypeScript SDK server (@modelcontextprotocol/server 2.x) for our client's interop tests.
//
//   node ts_server.mjs stdio          serveStdio: the opening message picks the era (2026-07-28 or 2025)
//   node ts_server.mjs http-stateless PORT   createMcpHandler with its default stateless 2025 fallback
//   node ts_server.mjs http PORT      createMcpHandler (2026-07-28, legacy: 'reject') behind node:http, with
//                                     2025-era traffic routed by isLegacyRequest to a sessionful
//                                     WebStandardStreamableHTTPServerTransport (the SDK's documented pattern)
//
// Tools: echo(text), add(a, b), greet (asks the user's name: an input_required result in the 2026 era, which
// the SDK's legacy shim turns into a real elicitation/create request on 2025 connections) and toggle (adds or
// removes the `extra` tool and publishes tools/list_changed).
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import http from 'node:http';

// Resolve packages from tools/node (ES modules ignore NODE_PATH).
const require = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const {
  McpServer, createMcpHandler, isLegacyRequest, WebStandardStreamableHTTPServerTransport,
  fromJsonSchema, inputRequired, acceptedContent,
} = require('@modelcontextprotocol/server');
const { serveStdio } = require('@modelcontextprotocol/server/stdio');

const [kind, portArg] = process.argv.slice(2);
const NAME_SCHEMA = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] };

let extraEnabled = false;          // whether the `extra` tool exists (shared by every instance of this process)
const instances = new Set();       // long-lived instances (stdio connection, legacy HTTP sessions): {server, extra}
let handler = null;                // the modern HTTP handler (its notify sugar feeds subscriptions/listen)

function registerExtra(server) {
  return server.registerTool('extra', { description: 'Comes and goes.' },
    async () => ({ content: [{ type: 'text', text: 'extra' }] }));
}

function makeServer(longLived) {
  const server = new McpServer({ name: 'ts-interop', version: '2.4.0' },
    { capabilities: { tools: { listChanged: true } } });
  const inst = { server, extra: null };
  server.registerTool('echo', {
    description: 'Return the text unchanged.',
    inputSchema: fromJsonSchema({ type: 'object', properties: { text: { type: 'string' } }, required: ['text'] }),
  }, async ({ text }) => ({ content: [{ type: 'text', text }] }));
  server.registerTool('add', {
    description: 'Add two numbers.',
    inputSchema: fromJsonSchema({
      type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'],
    }),
  }, async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  server.registerTool('greet', { description: "Ask the user's name, then greet." }, async (ctx) => {
    const got = acceptedContent(ctx.mcpReq.inputResponses, 'name');
    if (got === undefined || typeof got.name !== 'string') {
      return inputRequired({
        inputRequests: { name: inputRequired.elicit({ message: 'What is your name?', requestedSchema: NAME_SCHEMA }) },
      });
    }
    return { content: [{ type: 'text', text: `Hello, ${got.name}!` }] };
  });
  server.registerTool('toggle', { description: 'Add or remove the extra tool.' }, async () => {
    extraEnabled = !extraEnabled;
    for (const other of instances) {  // registering / removing on a connected instance sends list_changed
      if (extraEnabled && other.extra === null) other.extra = registerExtra(other.server);
      if (!extraEnabled && other.extra !== null) { other.extra.remove(); other.extra = null; }
    }
    if (handler !== null) handler.notify.toolsChanged();  // open 2026-07-28 listen streams over HTTP
    return { content: [{ type: 'text', text: extraEnabled ? 'added' : 'removed' }] };
  });
  if (extraEnabled) inst.extra = registerExtra(server);
  if (longLived) instances.add(inst);
  return inst;
}

async function toWebRequest(req, res) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const headers = new Headers();
  for (const [k, v] of Object.entries(req.headers)) {
    if (Array.isArray(v)) v.forEach((x) => headers.append(k, x));
    else if (v !== undefined) headers.set(k, v);
  }
  const ac = new AbortController();
  res.on('close', () => ac.abort());
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
  return new Request(`http://${req.headers.host}${req.url}`, {
    method: req.method, headers, body: hasBody ? Buffer.concat(chunks) : undefined, signal: ac.signal,
  });
}

async function writeWebResponse(res, response) {
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (response.body === null) { res.end(); return; }
  res.flushHeaders();  // an SSE stream is open once its headers are out, before its first event
  const reader = response.body.getReader();
  res.on('close', () => { reader.cancel().catch(() => {}); });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      res.write(value);
    }
  } catch { /* the client went away */ }
  res.end();
}

const sessions = new Map();  // Mcp-Session-Id -> {transport, inst}

async function legacyFetch(request) {
  const sid = request.headers.get('mcp-session-id');
  if (sid !== null) {
    const s = sessions.get(sid);
    if (s === undefined) return new Response('unknown session', { status: 404 });
    return s.transport.handleRequest(request);
  }
  const inst = makeServer(true);
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => { sessions.set(id, { transport, inst }); },
    onsessionclosed: (id) => { sessions.delete(id); instances.delete(inst); },
  });
  await inst.server.connect(transport);
  return transport.handleRequest(request);
}

if (kind === 'stdio') {
  serveStdio(() => makeServer(true).server, { onerror: (e) => console.error('ts_server:', e.message) });
} else if (kind === 'http' || kind === 'http-stateless') {
  // http-stateless: the handler's default 2025 serving (a fresh instance per request, no session, GET 405)
  handler = createMcpHandler(() => makeServer(false).server, {
    legacy: kind === 'http' ? 'reject' : 'stateless', onerror: (e) => console.error('ts_server:', e.message),
  });
  const server = http.createServer(async (req, res) => {
    try {
      if (new URL(req.url, 'http://x').pathname !== '/mcp') { res.writeHead(404).end(); return; }
      const request = await toWebRequest(req, res);
      const legacy = kind === 'http' && (await isLegacyRequest(request));
      const response = legacy ? await legacyFetch(request) : await handler.fetch(request);
      await writeWebResponse(res, response);
    } catch (e) {
      console.error('ts_server: request failed:', e);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  });
  server.listen(Number(portArg), '127.0.0.1', () => console.error(`ts_server: listening on ${portArg}`));
} else {
  console.error('usage: ts_server.mjs stdio | http PORT | http-stateless PORT');
  process.exit(2);
}
