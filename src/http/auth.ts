import { createHmac, hash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ProblemError } from './problem.js';

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
  }
}

export const SESSION_COOKIE = 'mothership_session';
const SESSION_TTL_MS = 12 * 60 * 60 * 1000;

/** Constant-time string equality; hashing first makes the comparison length-independent. */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(hash('sha256', a, 'buffer'), hash('sha256', b, 'buffer'));
}

export function unauthorized(): ProblemError {
  return new ProblemError(401, 'unauthorized', 'Missing or invalid credentials');
}

function parseCookies(header: string | undefined): Map<string, string> {
  const cookies = new Map<string, string>();
  for (const part of (header ?? '').split(';')) {
    const index = part.indexOf('=');
    if (index > 0) cookies.set(part.slice(0, index).trim(), part.slice(index + 1).trim());
  }
  return cookies;
}

/**
 * Admin authentication: `Authorization: Bearer <token>` or the dashboard's session cookie, a
 * stateless `expiry.hmac` value keyed by the admin token (a new token signs every session out).
 */
export class AdminAuth {
  private readonly sessionKey: Buffer;

  constructor(private readonly adminToken: string, secretsKey: Buffer) {
    this.sessionKey = createHmac('sha256', secretsKey).update('session:' + adminToken).digest();
  }

  private sign(expiry: string): string {
    return createHmac('sha256', this.sessionKey).update(expiry).digest('base64url');
  }

  isAdmin(request: FastifyRequest): boolean {
    const header = request.headers.authorization;
    if (header?.startsWith('Bearer ')) return safeEqual(header.slice(7).trim(), this.adminToken);
    const session = parseCookies(request.headers.cookie).get(SESSION_COOKIE);
    if (!session) return false;
    const [expiry, mac] = session.split('.');
    if (!expiry || !mac || !safeEqual(mac, this.sign(expiry))) return false;
    return Number(expiry) > Date.now();
  }

  register(app: FastifyInstance): void {
    app.addHook('onRequest', async (request) => {
      // An unmatched request has nothing to protect: the not-found handler answers it.
      if (request.is404) return;
      const mode = request.routeOptions.config.auth ?? 'admin';
      if (mode === 'public' || mode === 'bot') return;
      request.isAdmin = this.isAdmin(request);
      if (mode === 'admin' && !request.isAdmin) throw unauthorized();
    });

    app.post(
      '/api/session',
      {
        config: { auth: 'public', rateLimit: { group: 'session', cost: 10 } },
        schema: {
          tags: ['session'],
          summary: 'Sign the dashboard in with the admin token (sets an HttpOnly session cookie)',
          body: {
            type: 'object',
            required: ['token'],
            additionalProperties: false,
            properties: { token: { type: 'string', minLength: 1, maxLength: 512 } },
          },
        },
      },
      async (request, reply: FastifyReply) => {
        const { token } = request.body as { token: string };
        if (!safeEqual(token, this.adminToken)) throw unauthorized();
        const expiry = String(Date.now() + SESSION_TTL_MS);
        reply.header(
          'set-cookie',
          `${SESSION_COOKIE}=${expiry}.${this.sign(expiry)}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${SESSION_TTL_MS / 1000}`,
        );
        return reply.code(204).send();
      },
    );

    app.delete('/api/session', { config: { auth: 'public' }, schema: { tags: ['session'], summary: 'Sign out' } }, async (_request, reply) => {
      reply.header('set-cookie', `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`);
      return reply.code(204).send();
    });
  }
}
