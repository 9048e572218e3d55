// A real OAuth 2.1 authorization server for the resource-server tests: oidc-provider on loopback.
//
// Configuration comes from the environment (the pytest fixture sets it):
//   AS_PORT      the loopback port to listen on
//   AS_JWKS      a file holding {"keys": [...]} private signing keys; the first RS256 key signs
// Clients (client_credentials, client_secret_post/basic):
//   full   / full-secret    may get "tools:read tools:admin"
//   reader / reader-secret  may get "tools:read" only
//   opaque / opaque-secret  like full, but its access tokens are opaque (introspection tests)
// and one client that only introspects (client_secret_basic), as a resource server would:
//   rs     / rs-secret
// For the authorization code flow (PKCE, refresh tokens), a pre-registered public client `public-app` (any loopback
// redirect_uri registered in AS_REDIRECT_URIS, space-separated) and Dynamic Client Registration (RFC 7591).
// Login and consent are headless, test-only: /interaction/<uid> signs the user in as "alice" and grants
// the scopes asked for, so a user agent that follows redirects (with cookies) ends at the redirect_uri.
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
const client = (id, scope, method = 'client_secret_post') => ({
  client_id: id,
  client_secret: `${id}-secret`,
  grant_types: ['client_credentials'],
  redirect_uris: [],
  response_types: [],
  token_endpoint_auth_method: method,
  scope,
});

const publicApp = {
  client_id: 'public-app',
  grant_types: ['authorization_code', 'refresh_token'],
  redirect_uris: (process.env.AS_REDIRECT_URIS ?? 'http://127.0.0.1/callback').split(' '),
  response_types: ['code'],
  token_endpoint_auth_method: 'none',
};

const provider = new Provider(issuer, {
  clients: [client('full', 'tools:read tools:admin'), client('reader', 'tools:read'),
    client('opaque', 'tools:read tools:admin'), client('rs', 'tools:read', 'client_secret_basic'), publicApp],
  jwks,
  scopes: ['tools:read', 'tools:admin'],
  // refresh tokens for the clients allowed the grant (authorization code clients), none for the others
  issueRefreshToken: async (ctx, c) => c.grantTypeAllowed('refresh_token'),
  features: {
    devInteractions: { enabled: false },
    registration: { enabled: true },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    revocation: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      getResourceServerInfo: (ctx, resource, c) => ({
        scope: 'tools:read tools:admin',
        accessTokenFormat: c.clientId === 'opaque' ? 'opaque' : 'jwt',
        accessTokenTTL: 600,
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});
// Headless login and consent (test-only): sign in as "alice", grant every scope the request asks for.
provider.use(async (ctx, next) => {
  if (ctx.method !== 'GET' || !ctx.path.startsWith('/interaction/')) return next();
  const { prompt, params, session, grantId } = await provider.interactionDetails(ctx.req, ctx.res);
  let result;
  if (prompt.name === 'login') {
    result = { login: { accountId: 'alice' } };
  } else {
    const grant = grantId ? await provider.Grant.find(grantId)
      : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
    if (prompt.details.missingOIDCScope) grant.addOIDCScope(prompt.details.missingOIDCScope.join(' '));
    for (const [resource, scopes] of Object.entries(prompt.details.missingResourceScopes ?? {})) {
      grant.addResourceScope(resource, scopes.join(' '));
    }
    result = { consent: { grantId: await grant.save() } };
  }
  const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
  ctx.status = 303;
  ctx.redirect(returnTo);
});
// Quiet: the tests read stdout for READY only.
provider.on('server_error', (ctx, err) => { process.stderr.write(`server_error ${err}\n`); });
const server = provider.listen(port, '127.0.0.1', () => {
  process.stdout.write(`READY ${issuer}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
