// A real OAuth 2.1 authorization server for the resource-server tests: oidc-provider on loopback.
//
// Configuration comes from the environment (the pytest fixture sets it):
//   AS_PORT      the loopback port to listen on
//   AS_JWKS      a file holding {"keys": [...]} private signing keys; the first RS256 key signs
// Clients (client_credentials, client_secret_post/basic):
//   full   / full-secret    may get "tools:read tools:admin"
//   reader / reader-secret  may get "tools:read" only
//   brief  / brief-secret   like full, but its access tokens live 1 second (the expiry tests)
// Every resource indicator gets an audience-bound RS256 JWT access token (RFC 8707 + RFC 9068).
// Prints "READY <issuer>" on stdout once it listens.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// oidc-provider lives in the project's tools/node (ESM ignores NODE_PATH, so resolve it from there).
const tools = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
const { default: Provider } = await import(pathToFileURL(tools.resolve('oidc-provider')).href);

const port = Number(process.env.AS_PORT);
const jwks = JSON.parse(readFileSync(process.env.AS_JWKS, 'utf8'));
const issuer = `http://127.0.0.1:${port}`;
const client = (id, scope) => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: 'client_secret_post',
  scope,
});

const provider = new Provider(issuer, {
  clients: [client('full', 'tools:read tools:admin'), client('reader', 'tools:read'),
    client('brief', 'tools:read tools:admin')],
  jwks,
  scopes: ['tools:read', 'tools:admin'],
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      getResourceServerInfo: () => ({
        scope: 'tools:read tools:admin',
        accessTokenFormat: 'jwt',
        accessTokenTTL: 600,
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
  ttl: {
    ClientCredentials: (ctx, token, c) => (c.clientId === 'brief' ? 1 : 600),
  },
});
// Quiet: the tests read stdout for READY only.
provider.on('server_error', (ctx, err) => { process.stderr.write(`server_error ${err}\n`); });
const server = provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`READY ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
