import { hash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { RateLimitGuard, RouteRateLimit } from '../ratelimit/index.js';
import { ProblemError } from './problem.js';
import { noContent } from './schemas.js';
import { SESSION_TTL_MS, type SessionStore } from './sessions.js';

/**
 * Who may call a route (route `config.auth`). Everything under /api/ is `admin` unless it says
 * otherwise; `bot` and `admin_or_bot` routes are checked by the enrichment module's signature hook.
 */
export type AuthMode = 'admin' | 'public' | 'bot' | 'admin_or_bot';

/**
 * The one rule for who may call a route, decided when the route is registered from the path it
 * declares (never from a request's URL, whose encoding and form the router normalises first:
 * `/%61pi/bots` and `http://x/api/bots` both reach the `/api/bots` route). `resolveRouteAuth` stores
 * the result in the route's config; the auth hook and the OpenAPI document read it from there.
 */
export function routeAuth(url: string, declared: AuthMode | undefined): AuthMode {
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
  }
  interface FastifyRequest {
    /** Set when the request was authenticated as admin (bearer token or session cookie). */
    isAdmin?: boolean;
    /** Set when the request carried a valid bot signature. */
    botId?: string;
    /** A valid bot request's nonce, when its handler records it with its own write (enrichment/routes.ts). */
    botNonce?: string;
  }
}

export const SESSION_COOKIE = 'mothership_session';

/** The challenges a 401 names (RFC 9110 section 11.6.1): the admin token, and the bot signature scheme. */
export const ADMIN_CHALLENGE = 'Bearer realm="mothership"';
export const BOT_CHALLENGE = 'Mothership-Signature realm="mothership"';

/**
 * The sign-in bucket: a sign-in, and any request that presents a wrong admin token on any route,
 * costs 10 of the client's 60 tokens (6 guesses a minute per address). It guards a credential, so
 * it refuses (503) while the rate-limit store is away rather than letting guesses through.
 */
export const SIGN_IN_LIMIT: RouteRateLimit = { group: 'session', cost: 10, failClosed: true };

/** Constant-time string equality; hashing first makes the comparison length-independent. */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(hash('sha256', a, 'buffer'), hash('sha256', b, 'buffer'));
}

export function unauthorized(challenge: string = ADMIN_CHALLENGE): ProblemError {
  return new ProblemError('unauthorized', 'Missing or invalid credentials', undefined, { 'www-authenticate': challenge });
}

function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const index = part.indexOf('=');
    if (index > 0) cookies.set(part.slice(0, index).trim(), part.slice(index + 1).trim());
  }
  return cookies;
}

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

type Verdict = 'admin' | 'none' | 'wrong_token';

/**
 * Admin authentication: `Authorization: Bearer <token>` or the dashboard's session cookie (a
 * server-side session, see sessions.ts). A wrong token is charged to the sign-in bucket on every
 * route; a cookie is only honoured on same-origin requests.
 */
export class AdminAuth {
  constructor(
    private readonly adminToken: string,
    private readonly sessions: SessionStore,
    private readonly rateLimit: RateLimitGuard,
  ) {}

  /** Who the request is; throws 403 for the session cookie on a cross-origin request. */
  private async authenticate(request: FastifyRequest): Promise<Verdict> {
    const bearer = /^Bearer[ \t]+(.*)$/i.exec(request.headers.authorization ?? '');
    if (bearer) return safeEqual(bearer[1]!.trim(), this.adminToken) ? 'admin' : 'wrong_token';
    const session = parseCookies(request.headers.cookie).get(SESSION_COOKIE);
    if (!session) return 'none';
    const fetchSite = request.headers['sec-fetch-site'];
    const refusal = crossSiteRefusal(request.method, typeof fetchSite === 'string' ? fetchSite : undefined, request.headers.origin, request.host);
    if (refusal) throw new ProblemError('forbidden', refusal);
    return (await this.sessions.check(session)) ? 'admin' : 'none';
  }

  register(app: FastifyInstance): void {
    const signInLimit = this.rateLimit.limitOf(SIGN_IN_LIMIT);
    app.addHook('onRequest', async (request, reply) => {
      // An unmatched request has nothing to protect: the not-found handler answers it.
      if (request.is404) return;
      const mode = request.routeOptions.config.auth ?? 'admin';
      if (mode === 'public' || mode === 'bot') return;
      const verdict = await this.authenticate(request);
      request.isAdmin = verdict === 'admin';
      if (verdict === 'wrong_token') await this.rateLimit.enforce(request, reply, `ip:${request.ip}`, signInLimit);
      if (mode === 'admin' && !request.isAdmin) throw unauthorized();
    });

    const cookie = (request: FastifyRequest, value: string, maxAgeSeconds: number) =>
      `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${request.protocol === 'https' ? '; Secure' : ''}`;

    app.post(
      '/api/session',
      {
        schema: {
          tags: ['session'],
          summary: 'Sign the dashboard in with the admin token (sets an HttpOnly session cookie)',
          body: {
            type: 'object',
            required: ['token'],
            additionalProperties: false,
            properties: { token: { type: 'string', minLength: 1, maxLength: 512 } },
          },
          response: noContent('Signed in: the session cookie is set'),
        },
        config: { auth: 'public', rateLimit: SIGN_IN_LIMIT, problems: ['unauthorized'] },
      },
      async (request, reply: FastifyReply) => {
        const { token } = request.body as { token: string };
        if (!safeEqual(token, this.adminToken)) throw unauthorized();
        reply.header('set-cookie', cookie(request, await this.sessions.open(), SESSION_TTL_MS / 1000));
        return reply.code(204).send();
      },
    );

    app.delete('/api/session', { config: { auth: 'public' }, schema: { tags: ['session'], summary: 'Sign out: ends this session on the server and clears the cookie', response: noContent('Signed out') } }, async (request, reply) => {
      const session = parseCookies(request.headers.cookie).get(SESSION_COOKIE);
      if (session) await this.sessions.close(session);
      reply.header('set-cookie', cookie(request, '', 0));
      return reply.code(204).send();
    });

    app.delete('/api/sessions', { schema: { tags: ['session'], summary: 'Sign out everywhere: ends every dashboard session', response: noContent('Every session ended') } }, async (request, reply) => {
      await this.sessions.closeAll();
      reply.header('set-cookie', cookie(request, '', 0));
      return reply.code(204).send();
    });
  }
}
