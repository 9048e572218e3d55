// Drives the official TypeScript SDK 1.x client (@modelcontextprotocol/sdk, a 2025-era client that opens
// with initialize) against tests/legacy/legacy_app.py and prints what it got back as one JSON object.
//
//   node ts_sdk1_client.mjs http <url>
//   node ts_sdk1_client.mjs sse <url>        (the 2024-11-05 HTTP+SSE transport, SSEClientTransport)
//   node ts_sdk1_client.mjs stdio <command> [args...]
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StreamableHTTPClientTransport } = require('@modelcontextprotocol/sdk/client/streamableHttp.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');
const { SSEClientTransport } = require('@modelcontextprotocol/sdk/client/sse.js');
const types = require('@modelcontextprotocol/sdk/types.js');

const [kind, target, ...rest] = process.argv.slice(2);
const deadline = setTimeout(() => { console.error('ts_sdk1_client: timed out'); process.exit(3); }, 30000);

const transport = kind === 'http'
  ? new StreamableHTTPClientTransport(new URL(target))
  : kind === 'sse'
    ? new SSEClientTransport(new URL(target))
    : new StdioClientTransport({ command: target, args: rest, stderr: 'inherit' });
const client = new Client({ name: 'interop-sdk1', version: '1.0.0' },
  { capabilities: { elicitation: {}, sampling: {}, roots: { listChanged: true } } });

const out = { elicitations: [], samplings: [], logs: [], updated: [], toolsChanged: 0 };
client.setRequestHandler(types.ElicitRequestSchema, async (req) => {
  out.elicitations.push(req.params.message);
  return { action: 'accept', content: { name: 'Alice' } };
});
client.setRequestHandler(types.CreateMessageRequestSchema, async (req) => {
  out.samplings.push(req.params.messages[0].content.text);
  return { role: 'assistant', content: { type: 'text', text: 'sampled' }, model: 'test-model' };
});
client.setRequestHandler(types.ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///a' }, { uri: 'file:///b' }] }));
client.setNotificationHandler(types.LoggingMessageNotificationSchema, (n) => { out.logs.push(n.params.data); });
const waiters = [];
const arrived = () => { for (const w of waiters.splice(0)) w(); };
client.setNotificationHandler(types.ToolListChangedNotificationSchema, () => { out.toolsChanged += 1; arrived(); });
client.setNotificationHandler(types.ResourceUpdatedNotificationSchema, (n) => { out.updated.push(n.params.uri); arrived(); });
const until = async (cond) => {
  const stop = Date.now() + 10000;
  while (!cond() && Date.now() < stop) await new Promise((r) => { waiters.push(r); setTimeout(r, 200); });
};

await client.connect(transport);
out.version = transport.protocolVersion ?? transport._protocolVersion ?? null;
out.sessionId = kind === 'http' ? (transport.sessionId ?? null) : null;
out.server = client.getServerVersion();
out.capabilities = client.getServerCapabilities();
const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
out.greet = text(await client.callTool({ name: 'greet', arguments: { name: 'Ann' } }));
out.era = text(await client.callTool({ name: 'era', arguments: {} }));
out.askName = text(await client.callTool({ name: 'ask_name', arguments: {} }));
out.askTwice = text(await client.callTool({ name: 'ask_twice', arguments: {} }));
out.roots = text(await client.callTool({ name: 'roots_count', arguments: {} }));
await client.setLoggingLevel('info');
const progress = [];
out.chatty = text(await client.callTool({ name: 'chatty', arguments: {} }, undefined,
  { onprogress: (p) => progress.push(p.progress) }));
out.progress = progress;
out.prompt = (await client.getPrompt({ name: 'hello_prompt', arguments: { who: 'Zed' } })).messages[0].content.text;
out.completion = (await client.complete({ ref: { type: 'ref/prompt', name: 'hello_prompt' },
  argument: { name: 'who', value: 'al' } })).completion.values;
out.read = (await client.readResource({ uri: 'test://watched' })).contents[0].text;
await client.subscribeResource({ uri: 'test://watched' });
// Give the standalone GET stream (HTTP) a moment to be open before the changes happen.
await new Promise((r) => setTimeout(r, 300));
await client.callTool({ name: 'touch', arguments: { uri: 'test://watched' } });
await client.callTool({ name: 'change_tools', arguments: {} });
await until(() => out.updated.length >= 1 && out.toolsChanged >= 1);
await client.unsubscribeResource({ uri: 'test://watched' });
out.ping = await client.ping();
if (kind === 'http') await transport.terminateSession();
await client.close();
clearTimeout(deadline);
console.log(JSON.stringify(out));
