import { hash, timingSafeEqual } from 'node:crypto';
import fastifyCookie, { type CookieSerializeOptions } from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { addressKey } from './client-key.js';
import { invalid } from '../errors.js';
import { ProblemError } from './problem.js';
import { deviceLabel } from './device.js';
import { householdEntry, sessionRoles, type Role } from './roles.js';
import { noContent, withSchemaTypes } from './schemas.js';
import { REMEMBERED_TTL_MS, SESSION_TTL_MS, type SessionIdentity, type SessionStore } from './sessions.js';

/**
 * Who may call a route: its `config.auth`, the one declaration per route. Everything under /api/ is
 * `admin` unless it says otherwise; `ingest` marks the routes sensor nodes post to, `ci` the
 * baseline routes a CI job calls.
 */
export type AuthMode = 'admin' | 'ingest' | 'ci' | 'public' | 'bot' | 'admin_or_bot';

/**
 * What an API token may do: `ingest` post events and heartbeats, `read` GET (and HEAD) admin routes,
 * `ci` push and read baselines, `admin` everything.
 */
export const TOKEN_SCOPES = ['ingest', 'read', 'ci', 'admin'] as const;
export type TokenScope = (typeof TOKEN_SCOPES)[number];

/**
 * The credentials each mode accepts: the table the hooks of RouteAuth decide with, and from which
 * the OpenAPI document derives each operation's `security` (`openApiSecurity`) and its 401 and 403
 * (`errorCodes` in openapi.ts). `admin` accepts the admin credentials (the bootstrap token, the
 * dashboard session, an API token of a scope `tokenScopes` allows); `ingest` routes also take
 * `ingest` tokens.
 */
export const ROUTE_ACCESS: Record<AuthMode, { admin: boolean; bot: boolean; ingest: boolean; ci: boolean }> = {
  public: { admin: false, bot: false, ingest: false, ci: false },
  admin: { admin: true, bot: false, ingest: false, ci: false },
  ingest: { admin: true, bot: false, ingest: true, ci: false },
  ci: { admin: true, bot: false, ingest: false, ci: true },
  bot: { admin: false, bot: true, ingest: false, ci: false },
  admin_or_bot: { admin: true, bot: true, ingest: false, ci: false },
};

const READ_METHODS = new Set(['GET', 'HEAD']);

/** The API-token scopes a route takes: `config.tokenScopes` where the route narrows them, else its mode's (tokenScopes). */
export const routeTokenScopes = (config: { auth?: AuthMode; tokenScopes?: TokenScope[] }, method: string): TokenScope[] =>
  config.tokenScopes ?? tokenScopes(config.auth ?? 'admin', method);

/** The API-token scopes that may call a route of `mode` with `method`: none on a route without admin access. */
export function tokenScopes(mode: AuthMode, method: string): TokenScope[] {
  const access = ROUTE_ACCESS[mode];
  if (!access.admin) return [];
  if (access.ingest) return ['ingest', 'admin'];
  const scopes: TokenScope[] = READ_METHODS.has(method) ? ['read', 'admin'] : ['admin'];
  return access.ci ? ['ci', ...scopes] : scopes;
}

/**
 * The admin credentials (a bearer token, with the scopes it must have, or the dashboard session); a
 * bot's four signature headers, all required. OpenAPI 3.1 lets a non-OAuth requirement list roles:
 * the `admin` entry names the token scopes the operation accepts.
 */
type SecurityRequirement = Record<string, string[]>;
const BOT_SECURITY: SecurityRequirement = { botId: [], botTimestamp: [], botNonce: [], botSignature: [] };

/** A route's OpenAPI `security` (any one entry suffices: token scopes, session roles), or undefined for a public route. */
export function openApiSecurity(config: { auth: AuthMode; tokenScopes?: TokenScope[] }, method: string, url: string): SecurityRequirement[] | undefined {
  const { admin, bot } = ROUTE_ACCESS[config.auth];
  const security = [...(admin ? [{ admin: routeTokenScopes(config, method) }, { session: sessionRoles(method, url) }] : []), ...(bot ? [BOT_SECURITY] : [])];
  return security.length ? security : undefined;
}

/**
 * The one rule for who may call a route, decided when the route is registered from the path it
 * declares (never from a request's URL, whose encoding and form the router normalises first:
 * `/%61pi/bots` and `http://x/api/bots` both reach the `/api/bots` route). `resolveRouteAuth` stores
 * the result in the route's config; the auth hook and the OpenAPI document read it from there.
 */
function routeAuth(url: string, declared: AuthMode | undefined): AuthMode {
  return declared ?? (url.startsWith('/api/') || url === '/api' ? 'admin' : 'public');
}

/** An `onRoute` hook: every route carries its resolved `config.auth` from registration on. */
export function resolveRouteAuth(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    route.config = { ...route.config, auth: routeAuth(route.url, route.config?.auth) };
  });
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: AuthMode;
    /** Fewer API-token scopes than the mode's (a route about the caller's own account). */
    tokenScopes?: TokenScope[];
  }
  interface FastifyRequest {
    /** Set when the request was authenticated with admin credentials this route accepts (a bearer token of a scope it allows, or the session cookie). */
    isAdmin?: boolean;
    /** A valid bearer token's client (`token:<id>`): whom the request counts against, where not its address. */
    tokenClient?: string;
    /** A valid bearer token's scope (the admin token's is `admin`). */
    tokenScope?: TokenScope;
    /** The dashboard session the request came with, when it authenticated with one. */
    session?: SessionIdentity;
    /**
     * Whether the credential the request was admitted with admits it still: a token not revoked, a
     * session live and its role still allowed. A long request (an event stream) asks now and then.
     */
    stillAdmitted(): Promise<boolean>;
    /** Set when the request carried a valid bot signature. */
    botId?: string;
    /** A valid bot request's nonce, when its handler records it with its own write (enrichment/routes.ts). */
    botNonce?: string;
  }
}

export const SESSION_COOKIE = 'mothership_session';

/** The challenges a 401 names (RFC 9110 section 11.6.1): the admin token, and the bot signature scheme. */
const ADMIN_CHALLENGE = 'Bearer realm="mothership"';
export const BOT_CHALLENGE = 'Mothership-Signature realm="mothership"';

/**
 * The sign-in bucket: a sign-in, and any request that presents a wrong admin token on any route,
 * costs 10 of the client's 60 tokens (6 guesses a minute per address). It guards a credential, so
 * it refuses (503) while the rate-limit store is away rather than letting guesses through.
 */
export const SIGN_IN_LIMIT = { group: 'session', cost: 10, failClosed: true } as const;

/** Constant-time string equality; hashing first makes the comparison length-independent. */
function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(hash('sha256', a, 'buffer'), hash('sha256', b, 'buffer'));
}

/** A user name and password signing in: the user's name and role, or null when they do not match. */
export type VerifyUser = (username: string, password: string) => Promise<{ username: string; role: Role } | null>;

export function unauthorized(challenge: string = ADMIN_CHALLENGE): ProblemError {
  return new ProblemError('unauthorized', 'Missing or invalid credentials', undefined, { 'www-authenticate': challenge });
}

/** The session cookie: script-proof, same-site only, `Secure` whenever the request came over HTTPS. */
export const SESSION_COOKIE_OPTIONS: CookieSerializeOptions = { path: '/', httpOnly: true, sameSite: 'strict', secure: 'auto' };

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Whether an Origin header names this host (default ports compared as the URL parser reads them). */
function sameOrigin(origin: string, host: string | undefined): boolean {
  try {
    const url = new URL(origin);
    return host !== undefined && new URL(`${url.protocol}//${host}`).host === url.host;
  } catch {
    return false; // "null" (a sandboxed or file: page) or garbage: not our origin
  }
}

/**
 * Why a request authenticated by the session cookie must be refused as cross-site, or null. Every
 * port of a host is the same *site*, so SameSite=Strict lets a page on :1880 (Node-RED) send the
 * dashboard's cookie: only a same-*origin* request may use it. Fetch Metadata decides where the
 * browser sends it; older browsers still send Origin on every request that is not GET or HEAD.
 * A state change with neither header did not come from the dashboard: scripts use the Bearer token.
 */
export function crossSiteRefusal(method: string, fetchSite: string | undefined, origin: string | undefined, host: string | undefined): string | null {
  const safe = SAFE_METHODS.has(method);
  if (fetchSite !== undefined) {
    if (fetchSite === 'same-origin' || (fetchSite === 'none' && safe)) return null;
    return `A ${fetchSite} request may not use the dashboard session`;
  }
  if (origin !== undefined) return sameOrigin(origin, host) ? null : 'A request from another origin may not use the dashboard session';
  return safe ? null : 'A change made with the dashboard session must come from the dashboard; scripts use the Bearer token';
}

/** A bearer token that checked out: the rate-limit client it is charged to, and what it may do. */
export interface ApiCredential {
  client: string;
  scope: TokenScope;
}

/** The bootstrap admin token: every scope, its own generous bucket. */
const BOOTSTRAP: ApiCredential = { client: 'token:~admin', scope: 'admin' };

/** A check run on a request that throws (a 401, a 429) to refuse it. */
export type RequestCheck = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

export interface RouteAuthChecks {
  /** The sign-in bucket, charged for a wrong bearer token. */
  chargeSignIn: RequestCheck;
  /** The route's own limit, charged to the client address (no valid token). */
  chargeAddress: RequestCheck;
  /** The route's own limit, charged to the bucket of a valid token or live session (`client`). */
  chargeToken: (request: FastifyRequest, reply: FastifyReply, client: string) => Promise<void>;
  authenticateBot: RequestCheck;
  /** An API token's credential, or null when it is unknown or revoked. */
  resolveToken: (token: string) => Promise<ApiCredential | null>;
  verifyUser: VerifyUser;
}

/**
 * Enforces each route's `config.auth` (ROUTE_ACCESS). Admin: `Authorization: Bearer <token>` (the
 * bootstrap admin token, or an API token whose scope `tokenScopes` allows here, else 403) or the
 * dashboard's session cookie (a server-side session, see sessions.ts), only honoured on same-origin
 * requests. It also charges the route's rate limit once it knows who is calling: a valid token to its
 * own bucket, anything else to the client address, a wrong token to the sign-in bucket as well.
 * Bot: the signature check the enrichment module provides, once the body is read (it signs the raw
 * bytes), skipped for an admin on an `admin_or_bot` route.
 */
export class RouteAuth {
  /** Requests to a route that takes bots, without other credentials, whose bot check (which charges their route limit) has not run yet. */
  private readonly awaitingBotCheck = new WeakSet<FastifyRequest>();

  constructor(
    private readonly adminToken: string,
    private readonly sessions: SessionStore,
    private readonly checks: RouteAuthChecks,
  ) {}

  /**
   * A wrong token, for whoever watches the log for guessing: logged once the sign-in bucket has
   * let the guess through (6 a minute per address), at most a line per address a minute.
   */
  private refusedToken(request: FastifyRequest, refusal: string): void {
    request.server.throttledLog.write(request.log, addressKey(request.ip), 'info', { ip: request.ip }, refusal);
  }

  /** The bearer token's credential; 'wrong_token' for one that is not valid, null without one. */
  private async bearer(request: FastifyRequest): Promise<ApiCredential | 'wrong_token' | null> {
    const bearer = /^Bearer[ \t]+(.*)$/i.exec(request.headers.authorization ?? '');
    if (!bearer) return null;
    const token = bearer[1]!.trim();
    // Never a match for an admin token that is empty by mistake (start-up refuses one, this holds anyway).
    if (token === '') return 'wrong_token';
    if (safeEqual(token, this.adminToken)) return BOOTSTRAP;
    return (await this.checks.resolveToken(token)) ?? 'wrong_token';
  }

  /** The live session the cookie names, or null; throws 403 for it on a cross-origin request. */
  private async session(request: FastifyRequest): Promise<SessionIdentity | null> {
    const session = request.cookies[SESSION_COOKIE];
    if (!session) return null;
    const fetchSite = request.headers['sec-fetch-site'];
    const refusal = crossSiteRefusal(request.method, typeof fetchSite === 'string' ? fetchSite : undefined, request.headers.origin, request.host);
    if (refusal) throw new ProblemError('forbidden', refusal);
    return this.sessions.identify(session);
  }

  /** An admin route's check: a bearer token of a scope the route allows, or the session; `bot` routes may go on to the signature. */
  private async admit(request: FastifyRequest, reply: FastifyReply, mode: AuthMode): Promise<void> {
    const credential = await this.bearer(request);
    if (credential !== null && credential !== 'wrong_token') {
      await this.checks.chargeToken(request, reply, credential.client);
      const scopes = routeTokenScopes({ ...request.routeOptions.config, auth: mode }, request.method);
      if (!scopes.includes(credential.scope))
        throw new ProblemError(
          'forbidden',
          `This token has the scope "${credential.scope}"; ${request.method} ${request.routeOptions.url} needs a token with the scope ${scopes.map((scope) => `"${scope}"`).join(' or ')}`,
        );
      request.isAdmin = true;
      request.tokenClient = credential.client;
      request.tokenScope = credential.scope;
      return;
    }
    // A live session is charged to a bucket of its own, as a token is (a dashboard of a large household
    // makes a dozen requests a page, which would run a household's shared address bucket dry): a
    // user's sessions share their user's, so that signing in again gives no fresh one; an admin-token
    // session has its own. Anything else is charged to the address, a cross-site refusal included.
    const session =
      credential === null
        ? await this.session(request).catch((error: unknown) => this.checks.chargeAddress(request, reply).then(() => Promise.reject(error)))
        : null;
    if (session) await this.checks.chargeToken(request, reply, session.user === null ? `session:${session.id}` : `user:${session.user}`);
    // Without admin credentials on a route that takes bots, the bot check charges: the bot's own
    // bucket once signed, the address when not (charging both made bots behind one address share it).
    else if (credential === null && ROUTE_ACCESS[mode].bot) this.awaitingBotCheck.add(request);
    else await this.checks.chargeAddress(request, reply);
    if (credential === 'wrong_token') {
      await this.checks.chargeSignIn(request, reply);
      this.refusedToken(request, 'bearer token refused: neither the admin token nor a live API token (unknown or revoked)');
    }
    if (session) {
      if (!sessionRoles(request.method, request.routeOptions.url!).includes(session.role))
        throw new ProblemError(
          'forbidden',
          `A ${session.role} account may not call ${request.method} ${request.routeOptions.url}: it needs an admin (sign in as one, or with the admin token)`,
        );
      request.session = session;
    }
    request.isAdmin = session !== null;
    if (!ROUTE_ACCESS[mode].bot && !request.isAdmin) throw unauthorized();
  }

  /** Callback hooks (most requests pass them untouched; an async hook costs a promise each time): credentials, bot signature, household entry. */
  private addHooks(app: FastifyInstance): void {
    app.addHook('onRequest', (request, reply, done) => {
      // An unmatched request has nothing to protect: the not-found handler answers it.
      if (request.is404) return done();
      const mode = request.routeOptions.config.auth ?? 'admin';
      if (!ROUTE_ACCESS[mode].admin) {
        if (ROUTE_ACCESS[mode].bot) this.awaitingBotCheck.add(request);
        return done();
      }
      this.admit(request, reply, mode).then(() => done(), done);
    });
    app.addHook('preValidation', (request, reply, done) => {
      if (request.is404 || !ROUTE_ACCESS[request.routeOptions.config.auth ?? 'admin'].bot || request.isAdmin) return done();
      this.awaitingBotCheck.delete(request);
      this.checks.authenticateBot(request, reply).then(() => done(), done);
    });
    // A request refused before the bot check (a body or query that cannot be read) would cost no
    // bucket at all: it costs its address, as the check's own refusals do, and is a 429 once that is empty.
    app.addHook('onRoute', (route) => {
      if (!ROUTE_ACCESS[route.config!.auth!].bot) return;
      route.errorHandler = (error, request, reply) => {
        if (!this.awaitingBotCheck.has(request)) return request.server.errorHandler(error, request, reply);
        void this.checks.chargeAddress(request, reply).then(
          () => request.server.errorHandler(error, request, reply),
          (refusal: typeof error) => request.server.errorHandler(refusal, request, reply),
        );
      };
    });
    // A household entry that depends on the body is decided once the body is read and valid.
    app.addHook('preHandler', (request, _reply, done) => {
      if (request.session?.role !== 'household') return done();
      const entry = householdEntry(request.method, request.routeOptions.url!);
      const refusal = typeof entry === 'function' ? entry(request.body) : null;
      done(refusal ? new ProblemError('forbidden', refusal) : undefined);
    });
  }

  /** See `FastifyRequest.stillAdmitted`: the admission's checks again, without charging a rate limit or writing a log line. */
  private async stillAdmitted(request: FastifyRequest): Promise<boolean> {
    const credential = await this.bearer(request);
    if (credential === 'wrong_token') return false;
    if (credential) return routeTokenScopes(request.routeOptions.config, request.method).includes(credential.scope);
    const cookie = request.cookies[SESSION_COOKIE];
    // Not `touch`ed: a page left open on a stream is idle, and its session ends after the idle time.
    const session = cookie ? await this.sessions.identify(cookie, { touch: false }) : null;
    return session !== null && sessionRoles(request.method, request.routeOptions.url!).includes(session.role);
  }

  /** Registers the cookie parser first: the auth hook reads the session cookie it parsed. */
  async register(server: FastifyInstance): Promise<void> {
    await server.register(fastifyCookie);
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the decorator's `this` is the request
    const auth = this;
    server.decorateRequest('stillAdmitted', function (this: FastifyRequest) {
      return auth.stillAdmitted(this);
    });
    this.addHooks(server);
    const app = withSchemaTypes(server);
    app.post(
      '/api/session',
      {
        schema: {
          operationId: 'createSession',
          tags: ['session'],
          summary: 'Sign the dashboard in, as a user (name and password) or with the admin token; sets an HttpOnly session cookie',
          description:
            'Send `username` and `password`, or `token` (the admin token; spaces around it are ignored). `remember: true` keeps the session for 30 days instead of 12 hours.',
          body: {
            type: 'object',
            additionalProperties: false,
            properties: {
              token: { type: 'string', minLength: 1, maxLength: 512, description: 'The admin token (for set-up and recovery)' },
              username: { type: 'string', minLength: 1, maxLength: 64 },
              password: { type: 'string', minLength: 1, maxLength: 1024 },
              remember: { type: 'boolean', default: false, description: 'Remember this device: a 30-day session' },
            },
          },
          response: noContent('Signed in: the session cookie is set'),
        },
        config: { auth: 'public', rateLimit: SIGN_IN_LIMIT, problems: ['unauthorized'] },
      },
      async (request, reply) => {
        const { token, username, password, remember = false } = request.body;
        let user: string | null = null;
        if (token !== undefined) {
          if (username !== undefined || password !== undefined) throw invalid('/token', 'send either the admin token or a user name and password, not both');
          // A pasted token often brings a space or a line break along; the token itself has none.
          if (!safeEqual(token.trim(), this.adminToken)) {
            this.refusedToken(request, 'sign-in refused: wrong admin token');
            throw unauthorized();
          }
        } else {
          if (username === undefined) throw invalid('/username', 'must have a user name and a password, or the admin token');
          if (password === undefined) throw invalid('/password', 'must have a password');
          const verified = await this.checks.verifyUser(username.trim().toLowerCase(), password);
          if (!verified) {
            request.server.throttledLog.write(request.log, addressKey(request.ip), 'info', { ip: request.ip }, 'sign-in refused: wrong user name or password');
            throw new ProblemError('unauthorized', 'Wrong user name or password');
          }
          user = verified.username;
        }
        const session = await this.sessions.open({ user, remember, device: deviceLabel(request.headers['user-agent']) });
        reply.setCookie(SESSION_COOKIE, session, { ...SESSION_COOKIE_OPTIONS, maxAge: (remember ? REMEMBERED_TTL_MS : SESSION_TTL_MS) / 1000 });
        return reply.code(204).send();
      },
    );

    app.delete(
      '/api/session',
      {
        config: { auth: 'public' },
        schema: {
          operationId: 'deleteSession',
          tags: ['session'],
          summary: 'Sign out: ends this session on the server and clears the cookie',
          response: noContent('Signed out'),
        },
      },
      async (request, reply) => {
        const session = request.cookies[SESSION_COOKIE];
        if (session) await this.sessions.close(session);
        reply.clearCookie(SESSION_COOKIE, SESSION_COOKIE_OPTIONS);
        return reply.code(204).send();
      },
    );
  }
}
