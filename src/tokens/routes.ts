import type { FastifyInstance } from 'fastify';
import { idParams, nameString, noContent, nullableString, TOKEN_SCOPES, withSchemaTypes } from '../http/index.js';
import type { ApiTokenStore } from './store.js';

const tokenProperties = {
  id: { type: 'string' },
  name: { type: 'string' },
  scope: { type: 'string', enum: TOKEN_SCOPES },
  created_at: { type: 'string' },
  last_used_at: { ...nullableString, description: 'When the token was last used (updated at most once a minute)' },
} as const;

/** API tokens: created (shown once), listed (never the token), revoked. Creating and revoking need the `admin` scope, as every POST and DELETE does. */
export function tokenRoutes(server: FastifyInstance, tokens: ApiTokenStore): void {
  const app = withSchemaTypes(server);
  app.post(
    '/api/tokens',
    {
      schema: {
        operationId: 'createToken',
        tags: ['tokens'],
        summary: 'Create an API token; the token is shown once',
        body: {
          type: 'object',
          required: ['name', 'scope'],
          additionalProperties: false,
          properties: {
            name: nameString,
            scope: { type: 'string', enum: TOKEN_SCOPES, description: '`ingest`: POST /api/events and heartbeats; `read`: GET and HEAD; `admin`: everything' },
          },
        },
        response: {
          201: {
            type: 'object',
            properties: { ...tokenProperties, token: { type: 'string', description: 'mst_ and 43 characters: the Bearer token, shown only here' } },
          },
        },
      },
    },
    async (request, reply) => reply.code(201).send(await tokens.create(request.body)),
  );
  app.get(
    '/api/tokens',
    {
      schema: {
        operationId: 'listTokens',
        tags: ['tokens'],
        summary: 'Every API token (never the token itself)',
        response: { 200: { type: 'array', items: { type: 'object', properties: tokenProperties } } },
      },
    },
    () => tokens.list(),
  );
  app.delete(
    '/api/tokens/:id',
    { schema: { operationId: 'deleteToken', tags: ['tokens'], summary: 'Revoke an API token', params: idParams, response: noContent('Revoked') } },
    async (request, reply) => {
      await tokens.revoke(request.params.id);
      return reply.code(204).send();
    },
  );
}
