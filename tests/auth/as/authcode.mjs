// A real OAuth 2.1 authorization server for the client tests: oidc-provider on loopback, authorization code
// flow with PKCE (required), resource indicators (audience-bound RS256 JWT access tokens), refresh tokens,
// dynamic client registration and (when AS_CIMD=1) Client ID Metadata Documents.
//
// Login and consent are headless: /interaction/<uid> logs the user "alice" in and grants what the client
// asked for, so a user agent that follows redirects (with cookies) ends at the client's redirect_uri.
//
// Environment (the pytest fixture sets it):
//   AS_PORT   the loopback port;  AS_JWKS  a file holding {"keys": [...]} private signing keys
//   AS_CIMD   "1": accept https client_id URLs (test-only: the SSRF guard is dropped so 127.0.0.1 can be
//             fetched; the test's self-signed certificate is trusted through NODE_EXTRA_CA_CERTS)
// Pre-registered clients (redirect URIs on 127.0.0.1, any port: native clients):
//   cli-public   token_endpoint_auth_method none
//   cli-secret   / cli-secret-secret, client_secret_basic
// Prints "READY <issuer>" on stdout once it listens.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const tools = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const { default: Provider } = await import(pathToFileURL(tools.resolve('oidc-provider')).href);

const port = Number(process.env.AS_PORT);
const jwks = JSON.parse(readFileSync(process.env.AS_JWKS, 'utf8'));
const issuer = `http://127.0.0.1:${port}`;
const scopes = ['tools:read', 'tools:admin'];
const native = (id, extra) => ({
  client_id: id,
  application_type: 'native',
  grant_types: ['authorization_code', 'refresh_token'],
  redirect_uris: ['http://127.0.0.1/callback'],
  response_types: ['code'],
  ...extra,
});

const configuration = {
  clients: [
    native('cli-public', { token_endpoint_auth_method: 'none' }),
    native('cli-secret', { client_secret: 'cli-secret-secret', token_endpoint_auth_method: 'client_secret_basic' }),
  ],
  jwks,
  scopes: ['openid', 'offline_access', ...scopes],
  pkce: { required: () => true },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: scopes.join(' '),
        accessTokenFormat: 'jwt',
        accessTokenTTL: 600,
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
};
if (process.env.AS_CIMD === '1') {
  configuration.features.clientIdMetadataDocument = { enabled: true, ack: 'draft-02' };
  configuration.fetch = (url, options) => {
    delete options.dispatcher; // test-only: the SSRF guard refuses 127.0.0.1, where the test serves the document
    return globalThis.fetch(url, options);
  };
}

const provider = new Provider(issuer, configuration);
provider.on('server_error', (ctx, err) => { process.stderr.write(`server_error ${err}\n`); });

// Headless login and consent: log "alice" in, then grant every scope and resource the request asked for.
provider.use(async (ctx, next) => {
  const m = ctx.path.match(/^\/interaction\/([^/]+)$/);
  if (!m || ctx.method !== 'GET') return next();
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  const { prompt, params, session } = details;
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: 'alice' } };
  } else {
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    const d = prompt.details;
    if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
    if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
    for (const [resource, s] of Object.entries(d.missingResourceScopes || {})) grant.addResourceScope(resource, s.join(' '));
    result = { consent: { grantId: await grant.save() } };
  }
  await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
});

const server = provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`READY ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
