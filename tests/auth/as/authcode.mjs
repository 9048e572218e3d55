// A real OAuth 2.1 authorization server for the client tests: oidc-provider on loopback, authorization code
// flow with PKCE (required), resource indicators (audience-bound RS256 JWT access tokens), refresh tokens,
// dynamic client registration and (when AS_CIMD=1) Client ID Metadata Documents.
//
// Login and consent are headless (harness.mjs).
//
// Environment (the pytest fixture sets it): AS_PORT and AS_JWKS (harness.mjs), and
//   AS_CIMD   "1": accept https client_id URLs (test-only: the SSRF guard is dropped so 127.0.0.1 can be
//             fetched; the test's self-signed certificate is trusted through NODE_EXTRA_CA_CERTS)
// Pre-registered clients (redirect URIs on 127.0.0.1, any port: native clients):
//   cli-public   token_endpoint_auth_method none
//   cli-secret   / cli-secret-secret, client_secret_basic
// Prints "READY <issuer>" on stdout once it listens.
import { Provider, headlessInteractions, issuer, jwks, serve } from './harness.mjs';

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
headlessInteractions(provider);
serve(provider);
