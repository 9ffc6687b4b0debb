import type { OAuthClientProvider } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from '@modelcontextprotocol/sdk/shared/auth.js';

/**
 * What an MCP client application keeps for OAuth (the SDK asks it through OAuthClientProvider):
 * its registration, the PKCE verifier, the tokens. `redirectToAuthorization` is where a real
 * client opens the browser; here it records the URL for the test to sign in with.
 */
export class TestOAuthProvider implements OAuthClientProvider {
  client?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = '';
  authorizationUrl?: URL;
  constructor(
    readonly redirectUrl = 'http://127.0.0.1:9/callback',
    private readonly scope?: string,
  ) {}
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'signalbase test client',
      redirect_uris: [String(this.redirectUrl)],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      ...(this.scope ? { scope: this.scope } : {}),
    };
  }
  state() {
    return 'state-123';
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(c: OAuthClientInformationMixed) {
    this.client = c;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(t: OAuthTokens) {
    this.saved = t;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

/** The consent page's hidden sign-in request id, and the scopes it offers. */
export function parseConsentPage(html: string): { request: string; scopes: string[] } {
  const request = /name="request" value="([^"]+)"/.exec(html)?.[1];
  if (!request) throw new Error(`no sign-in form in:\n${html.slice(0, 500)}`);
  return { request, scopes: [...html.matchAll(/name="scope" value="([^"]+)"/g)].map((m) => m[1]!) };
}

/**
 * What the user does in the browser, over plain HTTP: opens the authorization URL, fills in the
 * sign-in form and approves (or denies). Returns the final answer (a redirect to the client, or
 * the page again with an error).
 */
export async function signIn(
  authorizationUrl: URL,
  form: { account: string; password: string; scopes?: string[]; action?: 'approve' | 'deny' },
) {
  const page = await fetch(authorizationUrl, { redirect: 'manual' });
  const html = await page.text();
  if (page.status !== 200) return { status: page.status, location: page.headers.get('location'), html };
  const { request, scopes } = parseConsentPage(html);
  const body = new URLSearchParams({ request, account: form.account, password: form.password, action: form.action ?? 'approve' });
  for (const s of form.scopes ?? scopes) body.append('scope', s);
  const res = await fetch(new URL('/consent', authorizationUrl), { method: 'POST', body, redirect: 'manual' });
  return { status: res.status, location: res.headers.get('location'), html: await res.text(), offered: scopes };
}

/** An SDK client connected to `mcpUrl` with a bearer token, or with an OAuth provider. */
export async function connect(mcpUrl: string, auth: { token: string } | { provider: OAuthClientProvider }): Promise<Client> {
  const client = new Client({ name: 'signalbase-test', version: '1.0.0' });
  const transport =
    'token' in auth
      ? new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { authorization: `Bearer ${auth.token}` } } })
      : new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: auth.provider });
  await client.connect(transport);
  return client;
}

/** POST one JSON-RPC request to /mcp with raw headers (for what the SDK client would not send). */
export async function rawMcp(
  mcpUrl: string,
  headers: Record<string, string>,
  body: unknown = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} },
) {
  const res = await fetch(mcpUrl, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2025-06-18',
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  return { status: res.status, headers: res.headers, json, text };
}

/**
 * A stand-in for a production authorization server, as the resource side sees one: its metadata
 * (RFC 8414, or OpenID discovery with `openid`) naming a JWKS, and the JWKS, whose keys the test
 * may change (`keys()` is read at each fetch; `fetches` counts them).
 */
export async function startTestIssuer(keys: () => object[], opts: { openid?: boolean } = {}) {
  const { createServer } = await import('node:http');
  const state = { issuer: '', fetches: 0 };
  const metadataPath = opts.openid ? '/.well-known/openid-configuration' : '/.well-known/oauth-authorization-server';
  const server = createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.url === metadataPath) return res.end(JSON.stringify({ issuer: state.issuer, jwks_uri: `${state.issuer}/jwks` }));
    if (req.url === '/jwks') {
      state.fetches++;
      return res.end(JSON.stringify({ keys: keys() }));
    }
    res.statusCode = 404;
    res.end('{}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  state.issuer = `http://127.0.0.1:${(server.address() as import('node:net').AddressInfo).port}`;
  return {
    get issuer() {
      return state.issuer;
    },
    get fetches() {
      return state.fetches;
    },
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
