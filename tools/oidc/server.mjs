// A local OpenID Connect provider for `make run` and the tests: oidc-provider on loopback, over
// plain http, with a minimal sign-in page of its own and no consent page (every configured
// client is first-party, so the scopes it asks for are granted at sign-in).
//
//   node server.mjs CONFIG.json
//
// CONFIG.json: {"issuer": "http://127.0.0.1:PORT", "port": PORT, "people_file": "/path/people.json",
//   "clients": [{"client_id", "client_secret", "redirect_uris": [...], "post_logout_redirect_uris": [...],
//   "token_endpoint_auth_method"?: "client_secret_basic" | "client_secret_post"}],
//   "provider_name"?: "Local SSO", "cookie_keys"?: [...]}
// people.json: [{"username", "password", "email", "name", "groups": [...], "preferred_username"?}],
// read again at every sign-in and every claims lookup, so an edit shows at the person's next
// sign-in. `username` is the sub; `preferred_username` defaults to it (a provider where people
// choose that claim, for tests of accounts linked by subject).
//
// Sessions, grants and codes live in memory and the signing key is made at start: a restart
// signs everyone out, and clients fetch the new key by its new `kid`.

import { createHash, createHmac, generateKeyPairSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';

import Provider, { errors } from 'oidc-provider';

const SCOPES = ['openid', 'profile', 'email', 'groups'];
const CLAIMS = {
  openid: ['sub'],
  profile: ['name', 'preferred_username'],
  email: ['email'],
  groups: ['groups'],
};
const MAX_FORM_BYTES = 16 * 1024;

function fail(message) {
  console.error(`oidc: ${message}`);
  process.exit(2);
}

function readConfig(argv) {
  if (argv.length !== 1) fail('usage: node server.mjs CONFIG.json');
  let config;
  try {
    config = JSON.parse(readFileSync(argv[0], 'utf8'));
  } catch (err) {
    fail(`cannot read the configuration ${argv[0]}: ${err.message}`);
  }
  for (const key of ['issuer', 'port', 'clients', 'people_file']) {
    if (config[key] === undefined) fail(`the configuration has no "${key}"`);
  }
  return config;
}

function escapeHtml(value) {
  return String(value)
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&#39;');
}

function sameSecret(given, expected) {
  // Digests first, so the comparison takes as long whatever the lengths.
  const a = createHash('sha256').update(String(given)).digest();
  const b = createHash('sha256').update(String(expected)).digest();
  return timingSafeEqual(a, b);
}

const config = readConfig(process.argv.slice(2));
const providerName = config.provider_name ?? 'Local SSO';
const issuerOrigin = new URL(config.issuer).origin;
const csrfKey = randomBytes(32);

function readPeople() {
  const people = JSON.parse(readFileSync(config.people_file, 'utf8'));
  if (!Array.isArray(people)) throw new Error(`${config.people_file} is not a list of people`);
  return people;
}

function findPerson(username) {
  return readPeople().find((person) => person.username === username);
}

function claimsOf(person) {
  return {
    sub: person.username,
    preferred_username: person.preferred_username ?? person.username,
    name: person.name ?? person.username,
    email: person.email,
    groups: [...(person.groups ?? [])],
  };
}

function signingKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  const kid = createHash('sha256').update(jwk.n).digest('base64url').slice(0, 16);
  return { ...jwk, kid, use: 'sig', alg: 'RS256' };
}

function page(ctx, status, title, body, extraCsp = '') {
  ctx.status = status;
  ctx.type = 'html';
  ctx.set('cache-control', 'no-store');
  ctx.set('x-frame-options', 'DENY');
  // No form-action: browsers apply it to the redirect to the client that follows the sign-in.
  ctx.set(
    'content-security-policy',
    `default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'${extraCsp}`,
  );
  ctx.body = `<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>${escapeHtml(title)} · ${escapeHtml(providerName)}</title>
  <style>
    body{font-family:system-ui,sans-serif;background:#f4f5f7;margin:0}
    main{max-width:22rem;margin:4rem auto;background:#fff;padding:1.5rem 2rem;border-radius:6px;box-shadow:0 1px 3px rgba(0,0,0,.2)}
    h1{font-size:1.4rem;margin:0 0 .25rem}p{color:#444}label{display:block;margin:.75rem 0 .25rem}
    input[type=text],input[type=password]{width:100%;box-sizing:border-box;padding:.5rem}
    button{margin-top:1rem;width:100%;padding:.6rem;background:#1a73e8;color:#fff;border:0;border-radius:4px;cursor:pointer}
    .error{color:#b00020;font-weight:600}
  </style>
</head>
<body>
<main>
<h1>${escapeHtml(providerName)}</h1>
${body}
</main>
</body>
</html>`;
}

function csrfToken(uid) {
  return createHmac('sha256', csrfKey).update(`interaction:${uid}`).digest('base64url');
}

function loginPage(ctx, details, client, { username = '', error = null } = {}) {
  const clientName = client?.clientName ?? details.params.client_id;
  const body = `
<p>Sign in to continue to <strong>${escapeHtml(clientName)}</strong>.</p>
${error ? `<p class="error" role="alert">${escapeHtml(error)}</p>` : ''}
<form method="post" action="/interaction/${escapeHtml(details.uid)}/login" autocomplete="off">
  <input type="hidden" name="csrf" value="${escapeHtml(csrfToken(details.uid))}">
  <label for="username">Username</label>
  <input type="text" id="username" name="username" value="${escapeHtml(username)}" required autofocus>
  <label for="password">Password</label>
  <input type="password" id="password" name="password" required>
  <button type="submit">Sign in</button>
</form>`;
  page(ctx, error ? 401 : 200, 'Sign in', body);
}

async function readForm(req) {
  const type = req.headers['content-type'] ?? '';
  if (!type.startsWith('application/x-www-form-urlencoded')) {
    throw new errors.InvalidRequest('the form must be application/x-www-form-urlencoded');
  }
  let size = 0;
  const chunks = [];
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_FORM_BYTES) throw new errors.InvalidRequest('the form is too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

async function grantAll(provider, accountId, clientId, grantId) {
  // First-party clients: whatever they ask for, within the scopes and claims this provider has.
  let grant = grantId ? await provider.Grant.find(grantId) : undefined;
  if (!grant || grant.accountId !== accountId || grant.clientId !== clientId) {
    grant = new provider.Grant({ accountId, clientId });
  }
  return grant;
}

function addRequested(grant, oidc) {
  const scopes = [...oidc.requestParamOIDCScopes];
  if (scopes.length) grant.addOIDCScope(scopes.join(' '));
  const claims = [...oidc.requestParamClaims];
  if (claims.length) grant.addOIDCClaims(claims);
}

const provider = new Provider(config.issuer, {
  clients: config.clients.map((client) => ({
    grant_types: ['authorization_code'],
    response_types: ['code'],
    token_endpoint_auth_method: 'client_secret_basic',
    id_token_signed_response_alg: 'RS256',
    ...client,
  })),
  jwks: { keys: [signingKey()] },
  cookies: {
    keys: config.cookie_keys ?? [randomBytes(32).toString('base64url')],
    // Cookies go to every port of a host: names of their own, away from the clients' cookies.
    names: { session: 'sso_session', interaction: 'sso_interaction', resume: 'sso_interaction_resume' },
  },
  scopes: SCOPES,
  claims: CLAIMS,
  responseTypes: ['code'],
  clientAuthMethods: ['client_secret_basic', 'client_secret_post'],
  // Scope-requested claims in the ID token too, for clients that read nothing else.
  conformIdTokenClaims: false,
  features: {
    devInteractions: { enabled: false },
    claimsParameter: { enabled: true },
    userinfo: { enabled: true },
    rpInitiatedLogout: { enabled: true, logoutSource, postLogoutSuccessSource },
  },
  pkce: { required: () => true }, // oidc-provider 9 knows S256 alone
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  async loadExistingGrant(ctx) {
    const { oidc } = ctx;
    const grantId = oidc.result?.consent?.grantId || oidc.session.grantIdFor(oidc.client.clientId);
    const grant = await grantAll(oidc.provider, oidc.account.accountId, oidc.client.clientId, grantId);
    addRequested(grant, oidc);
    await grant.save();
    return grant;
  },
  async findAccount(_ctx, sub) {
    if (!findPerson(sub)) return undefined;
    return {
      accountId: sub,
      async claims() {
        const person = findPerson(sub);
        if (!person) throw new Error(`${sub} is no longer in ${config.people_file}`);
        return claimsOf(person);
      },
    };
  },
  ttl: {
    AccessToken: 60 * 60,
    AuthorizationCode: 60,
    IdToken: 60 * 60,
    Interaction: 60 * 60,
    Session: 12 * 60 * 60,
    Grant: 12 * 60 * 60,
  },
  async renderError(ctx, out) {
    const lines = Object.entries(out)
      .map(([key, value]) => `<p><strong>${escapeHtml(key)}</strong>: ${escapeHtml(value)}</p>`)
      .join('\n');
    page(ctx, ctx.status >= 400 ? ctx.status : 400, 'Error', `<p class="error">Sign-in failed.</p>\n${lines}`);
  },
});

async function logoutSource(ctx, form) {
  // A client that proves who it is (a valid id_token_hint) signs the person out without a
  // question; anything else gets the confirmation the specification recommends.
  const known = Boolean(ctx.oidc.entities.IdTokenHint && ctx.oidc.client);
  if (known) {
    const script = "document.forms[0].submit();";
    const hash = createHash('sha256').update(script).digest('base64');
    const autoForm = form.replace('</form>', '<input type="hidden" name="logout" value="yes"/></form>');
    page(ctx, 200, 'Signing out', `<p>Signing out…</p>
${autoForm}
<noscript><button type="submit" form="op.logoutForm">Continue</button></noscript>
<script>${script}</script>`, `; script-src 'sha256-${hash}'`);
    return;
  }
  page(ctx, 200, 'Sign out', `<p>Sign out of ${escapeHtml(providerName)}?</p>
${form}
<button autofocus type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`);
}

async function postLogoutSuccessSource(ctx) {
  page(ctx, 200, 'Signed out', '<p>You are signed out.</p>');
}

provider.use(async (ctx, next) => {
  const match = /^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/.exec(ctx.path);
  if (!match) return next();
  const [, uid, login] = match;
  try {
    if (ctx.method === 'GET' && !login) return await showInteraction(ctx, uid);
    if (ctx.method === 'POST' && login) return await submitLogin(ctx, uid);
    ctx.status = 405;
    ctx.body = 'method not allowed';
    return undefined;
  } catch (err) {
    if (err instanceof errors.SessionNotFound || err instanceof errors.InvalidRequest) {
      page(ctx, 400, 'Error', `<p class="error">${escapeHtml(err.error_description ?? err.message)}</p>
<p>Go back to the application and sign in again.</p>`);
      return undefined;
    }
    throw err;
  }
});

async function showInteraction(ctx, uid) {
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.uid !== uid) throw new errors.SessionNotFound('interaction session not found');
  if (details.prompt.name === 'login') {
    const client = await provider.Client.find(details.params.client_id);
    return loginPage(ctx, details, client);
  }
  // A consent prompt (e.g. prompt=consent asked for): granted, as for every first-party client.
  const accountId = details.session?.accountId;
  if (!accountId) throw new errors.SessionNotFound('no signed-in person for this interaction');
  const grant = await grantAll(provider, accountId, details.params.client_id, details.grantId);
  const { missingOIDCScope, missingOIDCClaims } = details.prompt.details;
  if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(' '));
  if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
  const grantId = await grant.save();
  return provider.interactionFinished(ctx.req, ctx.res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

async function submitLogin(ctx, uid) {
  const origin = ctx.get('origin');
  if (origin && origin !== issuerOrigin) {
    page(ctx, 403, 'Error', '<p class="error">This form can only be sent from this page.</p>');
    return undefined;
  }
  const details = await provider.interactionDetails(ctx.req, ctx.res);
  if (details.uid !== uid || details.prompt.name !== 'login') {
    throw new errors.SessionNotFound('interaction session not found');
  }
  const form = await readForm(ctx.req);
  if (!sameSecret(form.get('csrf') ?? '', csrfToken(details.uid))) {
    page(ctx, 403, 'Error', '<p class="error">The form has expired. Go back and sign in again.</p>');
    return undefined;
  }
  const username = form.get('username') ?? '';
  const person = findPerson(username);
  const client = await provider.Client.find(details.params.client_id);
  if (!person || !sameSecret(form.get('password') ?? '', person.password)) {
    console.log(`${new Date().toISOString()} sign-in refused username=${JSON.stringify(username)} client=${details.params.client_id}`);
    return loginPage(ctx, details, client, { username, error: 'Wrong username or password' });
  }
  console.log(`${new Date().toISOString()} sign-in username=${person.username} client=${details.params.client_id} groups=${(person.groups ?? []).join(',')}`);
  return provider.interactionFinished(
    ctx.req,
    ctx.res,
    { login: { accountId: person.username, amr: ['pwd'], remember: true } },
    { mergeWithLastSubmission: false },
  );
}

provider.on('server_error', (_ctx, err) => console.error('oidc: server error', err));

const server = provider.listen(config.port, '127.0.0.1', () => {
  console.log(`${new Date().toISOString()} ${providerName} listening, issuer ${config.issuer}`);
});
server.on('error', (err) => fail(`cannot listen on 127.0.0.1:${config.port}: ${err.message}`));

function shutdown(signal) {
  console.log(`${new Date().toISOString()} ${signal}: stopping`);
  server.close(() => process.exit(0));
  server.closeAllConnections();
}
process.on('SIGTERM', () => shutdown('SIGTERM'));
process.on('SIGINT', () => shutdown('SIGINT'));
