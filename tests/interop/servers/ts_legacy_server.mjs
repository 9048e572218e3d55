// A legacy-only official TypeScript SDK server (@modelcontextprotocol/sdk 1.x: initialize handshake, sessions,
// server->client requests) for our client's fallback tests.
//
//   node ts_legacy_server.mjs stdio
//   node ts_legacy_server.mjs http PORT     sessionful StreamableHTTPServerTransport on node:http, endpoint /mcp
//
// Tools: echo(text), add(a, b), greet (elicitation/create to the client), haiku (sampling/createMessage to the
// client), toggle (adds or removes the `extra` tool; the SDK sends notifications/tools/list_changed) and
// crash_once(marker) (the first call writes its pid to `marker` and exits the process mid-request).
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import http from 'node:http';
import fs from 'node:fs';

// Resolve packages from tools/node (ES modules ignore NODE_PATH); zod from the SDK's own resolution.
const require = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const sdkRequire = createRequire(require.resolve('@modelcontextprotocol/sdk/server/mcp.js'));
const { McpServer } = sdkRequire('@modelcontextprotocol/sdk/server/mcp.js');
const { StdioServerTransport } = sdkRequire('@modelcontextprotocol/sdk/server/stdio.js');
const { StreamableHTTPServerTransport } = sdkRequire('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { z } = sdkRequire('zod');

const [kind, portArg] = process.argv.slice(2);
let extraEnabled = false;
const instances = new Set();  // {server, extra} per stdio connection / HTTP session

function registerExtra(server) {
  return server.registerTool('extra', { description: 'Comes and goes.' },
    async () => ({ content: [{ type: 'text', text: 'extra' }] }));
}

function makeServer() {
  const server = new McpServer({ name: 'ts-legacy-interop', version: '1.32.2' },
    { capabilities: { tools: { listChanged: true } } });
  const inst = { server, extra: null };
  server.registerTool('echo', { description: 'Return the text unchanged.', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text }] }));
  server.registerTool('add', { description: 'Add two numbers.', inputSchema: { a: z.number(), b: z.number() } },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  server.registerTool('greet', { description: "Ask the user's name, then greet." }, async () => {
    const answer = await server.server.elicitInput({
      message: 'What is your name?',
      requestedSchema: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] },
    });
    if (answer.action !== 'accept') return { content: [{ type: 'text', text: `no name (${answer.action})` }] };
    return { content: [{ type: 'text', text: `Hello, ${answer.content.name}!` }] };
  });
  server.registerTool('haiku', { description: 'Ask the client LLM for a haiku.', inputSchema: { topic: z.string() } },
    async ({ topic }) => {
      const reply = await server.server.createMessage({
        messages: [{ role: 'user', content: { type: 'text', text: `A haiku about ${topic}` } }],
        maxTokens: 50,
      });
      return { content: [{ type: 'text', text: `${reply.model}: ${reply.content.text}` }] };
    });
  server.registerTool('toggle', { description: 'Add or remove the extra tool.' }, async () => {
    extraEnabled = !extraEnabled;
    for (const other of instances) {  // registering / removing on a connected instance sends list_changed
      if (extraEnabled && other.extra === null) other.extra = registerExtra(other.server);
      if (!extraEnabled && other.extra !== null) { other.extra.remove(); other.extra = null; }
    }
    return { content: [{ type: 'text', text: extraEnabled ? 'added' : 'removed' }] };
  });
  server.registerTool('crash_once', { description: 'Exit the process the first time.', inputSchema: { marker: z.string() } },
    async ({ marker }) => {
      if (!fs.existsSync(marker)) { fs.writeFileSync(marker, String(process.pid)); process.exit(17); }
      return { content: [{ type: 'text', text: `answered by ${process.pid} after ${fs.readFileSync(marker, 'utf8')} crashed` }] };
    });
  if (extraEnabled) inst.extra = registerExtra(server);
  instances.add(inst);
  return inst;
}

if (kind === 'stdio') {
  await makeServer().server.connect(new StdioServerTransport());
} else if (kind === 'http') {
  const sessions = new Map();  // Mcp-Session-Id -> transport
  const httpServer = http.createServer(async (req, res) => {
    try {
      if (new URL(req.url, 'http://x').pathname !== '/mcp') { res.writeHead(404).end(); return; }
      const sid = req.headers['mcp-session-id'];
      let transport = typeof sid === 'string' ? sessions.get(sid) : undefined;
      if (transport === undefined && typeof sid === 'string') {
        res.writeHead(404, { 'Content-Type': 'text/plain' }).end('unknown session');
        return;
      }
      if (transport === undefined) {
        const inst = makeServer();
        transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (id) => { sessions.set(id, transport); },
        });
        transport.onclose = () => {
          if (transport.sessionId) sessions.delete(transport.sessionId);
          instances.delete(inst);
        };
        await inst.server.connect(transport);
      }
      await transport.handleRequest(req, res);
    } catch (e) {
      console.error('ts_legacy_server: request failed:', e);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    }
  });
  httpServer.listen(Number(portArg), '127.0.0.1', () => console.error(`ts_legacy_server: listening on ${portArg}`));
} else {
  console.error('usage: ts_legacy_server.mjs stdio | http PORT');
  process.exit(2);
}
