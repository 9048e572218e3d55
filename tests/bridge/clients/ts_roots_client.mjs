// Drives the official TypeScript client (@modelcontextprotocol/client 2.x), pinned to 2026-07-28 and
// declaring roots, against `mcp-stateless bridge --stdio` fronting tests/bridge/servers/roots_on_initialized.py,
// and prints what the upstream's `roots/list` on initialized got back, with the roots asks the client's
// handler saw, as one JSON object; tests/bridge/test_bridge_unprompted.py checks the values.
//
//   node ts_roots_client.mjs <command> [args...]
import { createRequire } from 'node:module';

const require = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const { Client } = require('@modelcontextprotocol/client');
const { StdioClientTransport } = require('@modelcontextprotocol/client/stdio');

const [command, ...args] = process.argv.slice(2);
const deadline = setTimeout(() => { console.error('ts_roots_client: timed out'); process.exit(3); }, 60000);

const client = new Client(
  { name: 'bridge-ts-roots', version: '1.0.0' },
  { capabilities: { roots: {} }, versionNegotiation: { mode: { pin: '2026-07-28' } } },
);
let asked = 0;
client.setRequestHandler('roots/list', async () => {
  asked += 1;
  return { roots: [{ uri: 'file:///work/project', name: 'project' }] };
});
await client.connect(new StdioClientTransport({ command, args, stderr: 'inherit' }));
const got = await client.callTool({ name: 'outcome', arguments: { which: 'initialized' } });
const out = { outcome: got.content.map((c) => c.text), asked };
await client.close();
clearTimeout(deadline);
process.stdout.write(JSON.stringify(out) + '\n');
