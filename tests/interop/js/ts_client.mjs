// Drives the official TypeScript client (@modelcontextprotocol/client) against one of our servers and
// prints what it got back as one JSON object on stdout; the pytest side checks every value.
//
//   node ts_client.mjs <pin|auto> <echo|conformance> http <url>
//   node ts_client.mjs <pin|auto> <echo|conformance> stdio <command> [args...]
import { createRequire } from 'node:module';

// Resolve packages from tools/node (ES modules ignore NODE_PATH).
const require = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const { Client, StreamableHTTPClientTransport } = require('@modelcontextprotocol/client');
const { StdioClientTransport } = require('@modelcontextprotocol/client/stdio');

const [mode, app, kind, target, ...rest] = process.argv.slice(2);
const deadline = setTimeout(() => { console.error('ts_client: timed out'); process.exit(3); }, 30000);

const transport = kind === 'http'
  ? new StreamableHTTPClientTransport(new URL(target))
  : new StdioClientTransport({ command: target, args: rest, stderr: 'inherit' });

const client = new Client(
  { name: 'interop-ts', version: '1.0.0' },
  {
    capabilities: { elicitation: {} },
    versionNegotiation: { mode: mode === 'auto' ? 'auto' : { pin: '2026-07-28' } },
  },
);
const elicitations = [];
client.setRequestHandler('elicitation/create', async (request) => {
  elicitations.push(request.params.message);
  return { action: 'accept', content: { name: 'Alice' } };
});
let changed = 0;
let onChanged = () => {};
client.setNotificationHandler('notifications/tools/list_changed', () => { changed += 1; onChanged(); });

const out = {};
await client.connect(transport);
out.era = client.getProtocolEra();
out.version = client.getNegotiatedProtocolVersion();
const discover = await client.discover();
out.discover = { supportedVersions: discover.supportedVersions, capabilities: discover.capabilities,
                 instructions: discover.instructions };
out.server = client.getServerVersion() ?? null;
const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name);

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
if (app === 'echo') {
  out.echo = text(await client.callTool({ name: 'echo', arguments: { text: 'héllo wörld ✓' } }));
  out.add = await client.callTool({ name: 'add', arguments: { a: 2, b: 3 } });
} else {
  out.simple = text(await client.callTool({ name: 'test_simple_text', arguments: {} }));
  // The content tools (a block, or a list of blocks): the client accepts each result (it refuses one whose
  // tool advertises an outputSchema without structuredContent) and sees these content types.
  out.contents = {};
  for (const name of ['test_image_content', 'test_audio_content', 'test_embedded_resource',
    'test_multiple_content_types']) {
    const r = await client.callTool({ name, arguments: {} });
    out.contents[name] = { types: r.content.map((c) => c.type), isError: r.isError ?? false };
  }
  out.greeting = text(await client.callTool({ name: 'test_input_required_result_elicitation', arguments: {} }));
  out.elicitations = elicitations;
  const sub = await client.listen({ toolsListChanged: true });
  out.honored = sub.honoredFilter;
  const got = new Promise((resolve) => { onChanged = resolve; });
  out.trigger = text(await client.callTool({ name: 'test_trigger_tool_change', arguments: {} }));
  await got;
  out.listChanged = changed;
  await sub.close();
  out.closed = await sub.closed;
}
await client.close();
clearTimeout(deadline);
process.stdout.write(JSON.stringify(out) + '\n');
