// The official TypeScript client (@modelcontextprotocol/client 2.x) through the whole authorization flow
// against a protected mcp-stateless server and a real authorization server (oidc-provider):
// 401 -> Protected Resource Metadata -> authorization server metadata -> (DCR) -> authorization code with
// PKCE and a resource indicator -> token -> calls; then a tool needing more scope -> 403 insufficient_scope
// -> a second authorization for the union of scopes -> the call succeeds; then a refused access token ->
// the refresh token -> the call succeeds.
// Login and consent at the authorization server are headless (tests/auth/as/server.mjs); the "browser" here
// follows redirects with a cookie jar until it reaches the redirect_uri, like a user agent would.
// Prints one JSON object on stdout; the pytest side checks every value.
//
//   node ts_oauth_client.mjs <mcp-url> <pre-registered|dcr|cimd> <issuer> [<client metadata document URL>]
// pre-registered: the client is `public-app` at <issuer>; dcr: it registers (RFC 7591); cimd: its client_id is
// the HTTPS URL of its Client ID Metadata Document (the test serves the document there).
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';

const require = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const { Client, OAuthError, StreamableHTTPClientTransport, UnauthorizedError } = require('@modelcontextprotocol/client');

const [url, mode, issuer, metadataUrl] = process.argv.slice(2);
const deadline = setTimeout(() => { console.error('ts_oauth_client: timed out'); process.exit(3); }, 60000);
// Never fetched: the user agent below stops at it, as a native app's loopback listener would take it.
const REDIRECT = 'http://127.0.0.1/callback';

class HeadlessProvider {
  constructor() {
    this.client = mode === 'pre-registered' ? { client_id: 'public-app', issuer } : undefined;
    this.registered = [];
    this.savedClients = [];
    this.saved = [];
    this.pending = undefined;
    this.lastState = undefined;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadataUrl() { return mode === 'cimd' ? metadataUrl : undefined; }
  get clientMetadata() {
    return { client_name: 'mcp-stateless TS interop', redirect_uris: [REDIRECT], response_types: ['code'],
             grant_types: ['authorization_code', 'refresh_token'], token_endpoint_auth_method: 'none' };
  }
  state() { this.lastState = randomUUID(); return this.lastState; }
  clientInformation() { return this.client; }
  // `registered`: the ids a registration answer (RFC 7591, with client_id_issued_at) gave; `savedClients`: all
  saveClientInformation(info) {
    this.client = info;
    this.savedClients.push(info.client_id);
    if (typeof info.client_id_issued_at === 'number') {
      this.registered.push(info.client_id);
      this.registeredScope = info.scope ?? null;  // what the authorization server registered it for
    }
  }
  tokens() { return this.tokenSet; }
  saveTokens(tokens) { this.tokenSet = tokens; this.saved.push(tokens.scope ?? null); }
  redirectToAuthorization(authorizationUrl) { this.pending = authorizationUrl; }
  saveCodeVerifier(verifier) { this.verifier = verifier; }
  codeVerifier() { return this.verifier; }
  // lets the SDK check that the callback comes from the authorization server it started with
  saveDiscoveryState(state) { this.discovery = state; }
  discoveryState() { return this.discovery; }
}

const jar = new Map();
async function userAgent(start) {
  let next = start;
  for (let hop = 0; hop < 12; hop += 1) {
    if (next.startsWith(REDIRECT)) return new URL(next);
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const r = await fetch(next, { redirect: 'manual', headers: cookie ? { cookie } : {} });
    for (const line of r.headers.getSetCookie()) {
      const [pair] = line.split(';');  // name=value; attributes (path scoping is not needed here)
      const eq = pair.indexOf('=');
      jar.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim());
    }
    const location = r.headers.get('location');
    if (r.status < 300 || r.status >= 400 || !location) {
      throw new Error(`authorization stopped at HTTP ${r.status}: ${(await r.text()).replace(/<style>[^]*<\/style>/, "").slice(0, 1500)}`);
    }
    next = new URL(location, next).href;
  }
  throw new Error('too many redirects during authorization');
}

const provider = new HeadlessProvider();
const out = { logins: [] };

// One authorization round: what the client asked for, and the callback handed back to the transport.
async function login(transport) {
  const asked = provider.pending;
  provider.pending = undefined;
  if (!asked) throw new Error('UnauthorizedError without an authorization URL');
  const callback = await userAgent(asked.href);
  const p = asked.searchParams;
  out.logins.push({
    authorize: `${asked.origin}${asked.pathname}`, clientId: p.get('client_id'), scope: p.get('scope'),
    resource: p.get('resource'), codeChallengeMethod: p.get('code_challenge_method'),
    stateEchoed: callback.searchParams.get('state') === provider.lastState,
    iss: callback.searchParams.get('iss'),
  });
  await transport.finishAuth(callback.searchParams);
}

const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');
const options = { capabilities: {}, versionNegotiation: { mode: { pin: '2026-07-28' } } };

let transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
let client = new Client({ name: 'interop-ts-oauth', version: '1.0.0' }, options);
try {
  await client.connect(transport);
  out.connectedWithoutLogin = true;
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
  await login(transport);
  await transport.close();
  transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  client = new Client({ name: 'interop-ts-oauth', version: '1.0.0' }, options);
  await client.connect(transport);
}
out.version = client.getNegotiatedProtocolVersion();
out.tools = (await client.listTools()).tools.map((t) => t.name);
out.whoami = (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent;

// A tool needing a scope the token lacks: 403 insufficient_scope, step-up, then the retried call.
let reset;
try {
  reset = await client.callTool({ name: 'reset', arguments: {} });
} catch (e) {
  if (!(e instanceof UnauthorizedError)) throw e;
  out.stepUp = true;
  try {
    await login(transport);
    reset = await client.callTool({ name: 'reset', arguments: {} });
  } catch (refused) {
    // The authorization server's answer to the step-up (e.g. a scope the client was not registered for)
    if (!(refused instanceof OAuthError)) throw refused;
    out.stepUpRefused = { code: refused.code, message: refused.message };
  }
}
out.reset = reset ? text(reset) : null;
// The client caches the (private) list per principal: the same user's wider token does not evict it.
out.toolsCachedAfter = (await client.listTools()).tools.map((t) => t.name);
out.toolsAfter = (await client.listTools(undefined, { cacheMode: 'refresh' })).tools.map((t) => t.name);
out.whoamiAfter = (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent;

// Refresh: the server refuses the stored access token (spoiled here, as if revoked), so the client uses
// its refresh token and retries, without a new login.
const held = provider.tokenSet;
out.hadRefreshToken = typeof held?.refresh_token === 'string';
const [head, body, sig] = held.access_token.split('.');
provider.tokenSet = { ...held, access_token: `${head}.${body}.${sig.slice(0, -6)}AAAAAA` };
const loginsBefore = out.logins.length;
out.whoamiRefreshed = (await client.callTool({ name: 'whoami', arguments: {} })).structuredContent;
out.refreshed = provider.tokenSet.access_token !== held.access_token && out.logins.length === loginsBefore
  && provider.pending === undefined;
out.registered = provider.registered;
out.savedClients = provider.savedClients;
if (provider.registered.length) out.registeredScope = provider.registeredScope;
out.savedScopes = provider.saved;
out.tokenType = provider.tokenSet?.token_type ?? null;
await client.close();
clearTimeout(deadline);
console.log(JSON.stringify(out));
