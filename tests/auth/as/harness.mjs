// What the test authorization servers (server.mjs, authcode.mjs) share: oidc-provider loaded from the
// project's tools/node, their configuration from the environment the pytest fixture sets, the headless
// login and consent, and the start that tests/auth/as_harness.py waits for.
//
//   AS_PORT   the loopback port to listen on
//   AS_JWKS   a file holding {"keys": [...]} private signing keys; the first RS256 key signs
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

// ESM ignores NODE_PATH, so oidc-provider is resolved from tools/node explicitly.
const tools = createRequire(new URL('../../../tools/node/package.json', import.meta.url));
export const { default: Provider } = await import(pathToFileURL(tools.resolve('oidc-provider')).href);

export const port = Number(process.env.AS_PORT);
export const jwks = JSON.parse(readFileSync(process.env.AS_JWKS, 'utf8'));
export const issuer = `http://127.0.0.1:${port}`;

// Headless login and consent (test-only): GET /interaction/<uid> signs the user in as "alice", then grants
// every scope, claim and resource scope the request asked for, and redirects (303) back into the flow, so
// a user agent that follows redirects (with cookies) ends at the client's redirect_uri.
export function headlessInteractions(provider) {
  provider.use(async (ctx, next) => {
    if (ctx.method !== 'GET' || !/^\/interaction\/[^/]+$/.test(ctx.path)) return next();
    const { prompt, params, session, grantId } = await provider.interactionDetails(ctx.req, ctx.res);
    let result;
    if (prompt.name === 'login') {
      result = { login: { accountId: 'alice' } };
    } else {
      const grant = grantId ? await provider.Grant.find(grantId)
        : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
      const d = prompt.details;
      if (d.missingOIDCScope) grant.addOIDCScope(d.missingOIDCScope.join(' '));
      if (d.missingOIDCClaims) grant.addOIDCClaims(d.missingOIDCClaims);
      for (const [resource, scopes] of Object.entries(d.missingResourceScopes ?? {})) {
        grant.addResourceScope(resource, scopes.join(' '));
      }
      result = { consent: { grantId: await grant.save() } };
    }
    const returnTo = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
    ctx.status = 303;
    ctx.redirect(returnTo);
  });
}

// Listens on 127.0.0.1:AS_PORT and prints "READY <issuer>" once it does; stderr gets server errors only.
export function serve(provider) {
  provider.on('server_error', (ctx, err) => { process.stderr.write(`server_error ${err}\n`); });
  const server = provider.listen(port, '127.0.0.1', () => {
    process.stdout.write(`READY ${issuer}\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}
