// Drives the official TypeScript client (@modelcontextprotocol/client 2.x), pinned to 2026-07-28, against
// `mcp-stateless bridge` fronting the reference everything server, and prints what it got back as one
// JSON object on stdout; tests/bridge/test_bridge_official_clients.py checks every value.
//
//   node ts_client.mjs http <url>
//   node ts_client.mjs stdio <command> [args...]
import { createRequire } from 'node:module';

// Resolve packages from tools/node (ES modules ignore NODE_PATH).
const require = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const { Client, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');
const { StdioClientTransport } = require('@modelcontextprotocol/client/stdio');

const [kind, target, ...rest] = process.argv.slice(2);
const deadline = setTimeout(() => { console.error('ts_client: timed out'); process.exit(3); }, 60000);

const transport = kind === 'http'
  ? new StreamableHTTPClientTransport(new URL(target))
  : new StdioClientTransport({ command: target, args: rest, stderr: 'inherit' });

const client = new Client(
  { name: 'bridge-ts', version: '1.0.0' },
  { capabilities: { elicitation: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
const elicitations = [];
client.setRequestHandler('elicitation/create', async (request) => {
  elicitations.push(request.params.message);
  return { action: 'accept', content: { name: 'Ada Lovelace', check: true } };
});

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text);
const out = {};
await client.connect(transport);
out.era = client.getProtocolEra();
out.version = client.getNegotiatedProtocolVersion();
const discover = await client.discover();
out.discover = { supportedVersions: discover.supportedVersions, capabilities: discover.capabilities };
out.server = client.getServerVersion() ?? null;
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.sum = text(await client.callTool({ name: 'get-sum', arguments: { a: 2, b: 40 } }));
out.echo = text(await client.callTool({ name: 'echo', arguments: { message: 'héllo wörld ✓' } }));
out.elicited = text(await client.callTool({ name: 'trigger-elicitation-request', arguments: {} }));
out.elicitations = elicitations;
await client.close();
clearTimeout(deadline);
process.stdout.write(JSON.stringify(out) + '\n');
