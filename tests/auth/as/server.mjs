// A real OAuth 2.1 authorization server for the resource-server tests: oidc-provider on loopback.
//
// Configuration comes from the environment (AS_PORT, AS_JWKS: see harness.mjs).
// Clients (client_credentials, client_secret_post/basic):
//   full   / full-secret    may get "tools:read tools:admin"
//   reader / reader-secret  may get "tools:read" only
//   opaque / opaque-secret  like full, but its access tokens are opaque (introspection tests)
// and one client that only introspects (client_secret_basic), as a resource server would:
//   rs     / rs-secret
// For the authorization code flow (PKCE, refresh tokens), a pre-registered public client `public-app` (any loopback
// redirect_uri registered in AS_REDIRECT_URIS, space-separated) and Dynamic Client Registration (RFC 7591).
// Login and consent are headless, test-only (harness.mjs).
// Every resource indicator gets an audience-bound RS256 JWT access token (RFC 8707 + RFC 9068).
// Prints "READY <issuer>" on stdout once it listens.
import { Provider, headlessInteractions, issuer, jwks, serve } from './harness.mjs';

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
headlessInteractions(provider);
serve(provider);
