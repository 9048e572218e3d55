// Drives the official TypeScript client 2.x (@modelcontextprotocol/client) in `versionNegotiation: auto`
// (probe with server/discover, fall back to initialize) over the 2024-11-05 HTTP+SSE transport
// (SSEClientTransport), and prints what it got back as one JSON object.
//
//   node ts_client2_sse_auto.mjs <url>
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const { Client, SSEClientTransport } = require('@modelcontextprotocol/client');

const [target] = process.argv.slice(2);
const deadline = setTimeout(() => { console.error('ts_client2_sse_auto: timed out'); process.exit(3); }, 30000);

const client = new Client({ name: 'interop-client2-sse', version: '1.0.0' },
  { capabilities: {}, versionNegotiation: { mode: 'auto' } });
await client.connect(new SSEClientTransport(new URL(target)));
const out = { version: client.getNegotiatedProtocolVersion() };
out.tools = (await client.listTools()).tools.map((t) => t.name).sort();
const greeting = await client.callTool({ name: 'greet', arguments: { name: 'Ann' } });
out.greet = greeting.content.map((c) => c.text).join('');
await client.close();
clearTimeout(deadline);
console.log(JSON.stringify(out));
