// A real OAuth 2.0 authorization server for the connectors' OAuth client tests: oidc-provider
// (OpenID certified), not a fake of our own. One confidential client; authorization code with
// PKCE (S256, required), refresh tokens issued on every code and rotated on every refresh, access
// tokens that live a few seconds; token introspection and revocation on.
//
//   node server.mjs [--port N] [--client-id ID] [--client-secret S] [--redirect-uri URI]
//                   [--auth-method client_secret_basic|client_secret_post]
//                   [--access-ttl SECONDS] [--refresh-ttl SECONDS] [--account ID]
//
// Each option may also come from the environment (OAUTH_PORT, OAUTH_CLIENT_ID, ...). Port 0 (the
// default) picks a free one. The first line on stdout is the issuer, `http://127.0.0.1:PORT`;
// its discovery document is at /.well-known/openid-configuration. The server exits when its
// stdin closes, so a test that dies does not leave it behind.
//
// Test-only routes, beside the standard ones:
// - GET /interaction/:uid: the login and consent page, approving at once for the one account.
// - POST /test/authorize {"url"}: the user's browser. Follows an authorization URL through
//   login and consent with a cookie jar and answers {"location"}: the redirect back to the
//   client (its code, state and iss), or {"status", "body"} when the server answered a page.
// - POST /test/revoke: destroys every grant (and its tokens), as a user revoking the app does:
//   the next refresh answers `invalid_grant`. Answers {"revoked": N}.
// - POST /test/fail {"count", "status"}: the next `count` token requests answer `status`
//   (default 503) before reaching the server: an outage, for the client's transient errors.
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import http from 'node:http';
import Provider from 'oidc-provider';

function option(name, fallback) {
  const flag = `--${name}`;
  const at = process.argv.indexOf(flag);
  if (at !== -1 && at + 1 < process.argv.length) {
    return process.argv[at + 1];
  }
  const env = process.env[`OAUTH_${name.toUpperCase().replaceAll('-', '_')}`];
  return env === undefined || env === '' ? fallback : env;
}

const port = Number(option('port', '0'));
const clientId = option('client-id', 'engram-test');
const clientSecret = option('client-secret', 'engram-test-secret');
const redirectUri = option('redirect-uri', 'http://127.0.0.1:9/oauth/callback');
const authMethod = option('auth-method', 'client_secret_basic');
const accessTtl = Number(option('access-ttl', '60'));
const refreshTtl = Number(option('refresh-ttl', '3600'));
const account = option('account', 'test-user');

// Grants made by the interaction route, for /test/revoke.
const grants = new Set();
// Token requests still to fail, and with which status.
let failing = { count: 0, status: 503 };

const readBody = (req) => new Promise((resolve, reject) => {
  const chunks = [];
  req.on('data', (chunk) => chunks.push(chunk));
  req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  req.on('error', reject);
});

const json = (res, status, value) => {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
};

const server = http.createServer();
server.listen(port, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const provider = new Provider(issuer, {
    clients: [{
      client_id: clientId,
      client_secret: clientSecret,
      redirect_uris: [redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: authMethod,
    }],
    scopes: ['openid', 'offline_access', 'read', 'write'],
    jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'test', alg: 'RS256', use: 'sig' }] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      introspection: { enabled: true },
      revocation: { enabled: true },
    },
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    // A refresh token for every code (as the providers engram connects to issue them, without
    // `offline_access`), living its own lifetime rather than the login session's.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
    rotateRefreshToken: true,
    ttl: {
      AccessToken: accessTtl,
      AuthorizationCode: 60,
      RefreshToken: refreshTtl,
      Grant: refreshTtl,
      Interaction: 300,
      Session: 600,
    },
  });
  const callback = provider.callback();

  // The user: logs in as `account` and grants every scope asked.
  async function interaction(req, res) {
    const details = await provider.interactionDetails(req, res);
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: account, clientId: details.params.client_id });
    if (details.params.scope) {
      grant.addOIDCScope(details.params.scope);
    }
    const grantId = await grant.save();
    grants.add(grantId);
    await provider.interactionFinished(req, res, {
      login: { accountId: account },
      consent: { grantId },
    }, { mergeWithLastSubmission: false });
  }

  // The user's browser: follows redirects on this server, keeping its cookies, until one leads
  // elsewhere (the client's redirect URI).
  async function authorize(url) {
    const jar = new Map();
    let next = new URL(url, issuer);
    for (let hop = 0; hop < 20; hop += 1) {
      if (next.origin !== issuer) {
        return { location: next.href };
      }
      const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
      const answer = await fetch(next, { redirect: 'manual', headers: cookie ? { cookie } : {} });
      for (const line of answer.headers.getSetCookie()) {
        const [pair] = line.split(';');
        const at = pair.indexOf('=');
        jar.set(pair.slice(0, at).trim(), pair.slice(at + 1).trim());
      }
      const location = answer.headers.get('location');
      if (answer.status < 300 || answer.status >= 400 || !location) {
        return { status: answer.status, body: await answer.text() };
      }
      await answer.arrayBuffer();
      next = new URL(location, next);
    }
    throw new Error('too many redirects');
  }

  async function revoke() {
    const revoked = grants.size;
    for (const grantId of grants) {
      await Promise.all(
        [provider.AccessToken, provider.RefreshToken, provider.AuthorizationCode]
          .map((model) => model.adapter.revokeByGrantId(grantId))
          .concat(provider.Grant.adapter.destroy(grantId)),
      );
    }
    grants.clear();
    return revoked;
  }

  server.on('request', async (req, res) => {
    try {
      const path = new URL(req.url, issuer).pathname;
      if (req.method === 'GET' && path.startsWith('/interaction/')) {
        await interaction(req, res);
      } else if (req.method === 'POST' && path === '/test/authorize') {
        const { url } = JSON.parse(await readBody(req));
        json(res, 200, await authorize(url));
      } else if (req.method === 'POST' && path === '/test/revoke') {
        await readBody(req);
        json(res, 200, { revoked: await revoke() });
      } else if (req.method === 'POST' && path === '/test/fail') {
        const asked = JSON.parse((await readBody(req)) || '{}');
        failing = { count: asked.count ?? 1, status: asked.status ?? 503 };
        json(res, 200, failing);
      } else if (path === '/token' && failing.count > 0) {
        failing.count -= 1;
        await readBody(req);
        res.writeHead(failing.status, { 'content-type': 'text/html' });
        res.end('<html><body>Service Unavailable</body></html>');
      } else {
        callback(req, res);
      }
    } catch (err) {
      console.error(`oauth-server: ${req.method} ${req.url}: ${err.stack ?? err}`);
      if (!res.headersSent) {
        json(res, 500, { error: 'server_error', error_description: String(err.message ?? err) });
      } else {
        res.end();
      }
    }
  });

  process.stdout.write(`${issuer}\n`);
});

process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
