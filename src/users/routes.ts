import type { FastifyInstance } from 'fastify';
import { notFound } from '../errors.js';
import {
  idString,
  nameString,
  noContent,
  nullableString,
  ROLES,
  SESSION_COOKIE,
  SESSION_COOKIE_OPTIONS,
  withSchemaTypes,
  type SessionStore,
} from '../http/index.js';
import { PASSWORD_LENGTH } from './password.js';
import type { UserStore } from './store.js';

const userSchema = {
  type: 'object',
  properties: { username: { type: 'string' }, name: { type: 'string' }, role: { type: 'string', enum: ROLES }, created_at: { type: 'string' } },
} as const;
const password = {
  type: 'string',
  minLength: PASSWORD_LENGTH.min,
  maxLength: PASSWORD_LENGTH.max,
  description: `${PASSWORD_LENGTH.min} to ${PASSWORD_LENGTH.max} characters`,
} as const;
const role = {
  type: 'string',
  enum: ROLES,
  description: '`admin`: everything; `household`: Overview, People, Nodes and clearing a fall (docs/security.md)',
} as const;
const usernameParams = { type: 'object', required: ['username'], properties: { username: idString } } as const;

const sessionSchema = {
  type: 'object',
  properties: {
    id: { type: 'string', description: 'The session’s public id (a hash; the cookie itself is never shown)' },
    user: { ...nullableString, description: 'The user name; null: signed in with the admin token' },
    name: nullableString,
    role: { type: 'string', enum: ROLES },
    device: { ...nullableString, description: 'What signed in, from its User-Agent ("Firefox on Android")' },
    remembered: { type: 'boolean', description: 'Remember this device: a 30-day session' },
    current: { type: 'boolean', description: 'The session this request came with' },
    created_at: { type: 'string' },
    last_seen_at: { type: 'string', description: 'Updated at most once a minute' },
    expires_at: { type: 'string' },
  },
} as const;
const sessionParams = { type: 'object', required: ['id'], properties: { id: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' } } } as const;

/** Dashboard users, managed by an admin (every route here but the session ones is admin-only: HOUSEHOLD_ROUTES lists none of them). */
export function userRoutes(server: FastifyInstance, users: UserStore): void {
  const app = withSchemaTypes(server);
  const tags = ['users'];
  app.get(
    '/api/users',
    { schema: { operationId: 'listUsers', tags, summary: 'Every dashboard user (never a password)', response: { 200: { type: 'array', items: userSchema } } } },
    () => users.list(),
  );
  app.post(
    '/api/users',
    {
      config: { problems: ['conflict'] },
      schema: {
        operationId: 'createUser',
        tags,
        summary: 'Create a dashboard user; a user name already taken is 409',
        body: {
          type: 'object',
          required: ['username', 'role', 'password'],
          additionalProperties: false,
          properties: { username: { ...idString, description: 'The sign-in name: lowercase letters, digits, _ and -' }, name: nameString, role, password },
        },
        response: { 201: userSchema },
      },
    },
    async (request, reply) => reply.code(201).send(await users.create(request.body)),
  );
  app.get(
    '/api/users/:username',
    { schema: { operationId: 'getUser', tags, summary: 'One dashboard user', params: usernameParams, response: { 200: userSchema } } },
    (request) => users.get(request.params.username),
  );
  app.patch(
    '/api/users/:username',
    {
      schema: {
        operationId: 'updateUser',
        tags,
        summary: 'Rename, change the role (at once) or set a new password (which signs the user out everywhere)',
        params: usernameParams,
        body: { type: 'object', additionalProperties: false, properties: { name: nameString, role, password } },
        response: { 200: userSchema },
      },
    },
    (request) => users.update(request.params.username, request.body),
  );
  app.delete(
    '/api/users/:username',
    { schema: { operationId: 'deleteUser', tags, summary: 'Delete a user and end their sessions', params: usernameParams, response: noContent('Deleted') } },
    async (request, reply) => {
      await users.remove(request.params.username);
      return reply.code(204).send();
    },
  );
}

/**
 * The sessions a caller may see and end: a household user their own, an admin (user, session or
 * token) everyone's. `GET /api/session` says who the dashboard is signed in as.
 */
export function sessionRoutes(server: FastifyInstance, sessions: SessionStore, users: UserStore): void {
  const app = withSchemaTypes(server);
  const tags = ['session'];
  /** Whose sessions the request may list and end: undefined for everyone's. */
  const scope = (request: { session?: { user: string | null; role: string } }) =>
    request.session?.role === 'household' ? (request.session.user ?? undefined) : undefined;

  app.get(
    '/api/session',
    {
      // A read, ingest or ci token is no dashboard account; this says who a session or the admin token is.
      config: { tokenScopes: ['admin'] },
      schema: {
        operationId: 'getCurrentSession',
        tags,
        summary: 'Who this request is signed in as (the dashboard reads its role from here)',
        response: {
          200: {
            type: 'object',
            properties: {
              user: { ...nullableString, description: 'null: the admin token (a session opened with it, or the bearer token) or an admin API token' },
              name: nullableString,
              role: { type: 'string', enum: ROLES },
            },
          },
        },
      },
    },
    async (request) => {
      const user = request.session?.user ?? null;
      return { user, name: user === null ? null : (await users.get(user)).name, role: request.session?.role ?? 'admin' };
    },
  );
  app.get(
    '/api/sessions',
    {
      schema: {
        operationId: 'listSessions',
        tags,
        summary: 'The live dashboard sessions: a household user sees their own, an admin every one',
        response: { 200: { type: 'array', items: sessionSchema } },
      },
    },
    async (request) => (await sessions.list(scope(request))).map((session) => ({ ...session, current: session.id === request.session?.id })),
  );
  app.delete(
    '/api/sessions/:id',
    {
      schema: {
        operationId: 'revokeSession',
        tags,
        summary: 'End one session (a household user: one of their own)',
        params: sessionParams,
        response: noContent('Ended'),
      },
    },
    async (request, reply) => {
      if (!(await sessions.revoke(request.params.id, scope(request)))) throw notFound('Session', request.params.id);
      if (request.params.id === request.session?.id) reply.clearCookie(SESSION_COOKIE, SESSION_COOKIE_OPTIONS);
      return reply.code(204).send();
    },
  );
  app.delete(
    '/api/sessions',
    {
      schema: {
        operationId: 'deleteAllSessions',
        tags,
        summary: 'Sign out everywhere: ends every dashboard session (a household user: all of their own)',
        response: noContent('Ended'),
      },
    },
    async (request, reply) => {
      await sessions.closeAll(scope(request));
      reply.clearCookie(SESSION_COOKIE, SESSION_COOKIE_OPTIONS);
      return reply.code(204).send();
    },
  );
}
