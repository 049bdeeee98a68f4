import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { addressKey, idParams, idString, jsonObject, nameString, noContent, pageLimit, perPage, withSchemaTypes } from '../http/index.js';
import { ENRICHMENT_REQUEST_LIMIT, JSON_LIMITS, RECORD_PAGE } from '../limits.js';
import { rateLimitItems, type RateLimitGuard } from '../ratelimit/index.js';
import type { BotAuthenticator } from './bot-auth.js';
import { SECRET_CACHE_MS, type BotService } from './bots.js';
import { DomainError } from '../errors.js';
import { BotRefused } from './errors.js';
import { MATCH_STATUSES, type MatchService } from './matches.js';
import { DAILY_QUOTA, QUOTA_POLICY, QUOTA_WINDOW_MS } from './quota.js';
import type { EnrichmentRequests } from './request.js';
import type { EnrichmentStatus } from './status.js';

const matchSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    status: { type: 'string', enum: MATCH_STATUSES },
    enrichment_requested_at: { type: ['string', 'null'] },
    enrichment: {
      type: 'object',
      properties: {
        status: { type: ['string', 'null'] },
        commentary: { type: ['string', 'null'] },
        error: { type: ['string', 'null'] },
        completed_at: { type: ['string', 'null'] },
      },
    },
    created_at: { type: 'string' },
  },
} as const;

const replaySchema = { ...jsonObject(JSON_LIMITS.replay, 'Replay document the worker reads (docs/enrichment.md).'), additionalProperties: true } as const;

/** Adds the daily quota to the RateLimit headers the request limiter already set. */
function quotaHeaders(reply: FastifyReply, remaining: number, resetSeconds: number): void {
  const join = (name: string, value: string) => {
    const existing = reply.getHeader(name);
    reply.header(name, existing ? `${String(existing)}, ${value}` : value);
  };
  const items = rateLimitItems(QUOTA_POLICY, { quota: DAILY_QUOTA, windowSeconds: QUOTA_WINDOW_MS / 1000, remaining, nextSeconds: resetSeconds });
  join('ratelimit-policy', items.policy);
  join('ratelimit', items.limit);
}

/**
 * The check RouteAuth runs on `bot` routes (and `admin_or_bot` ones without an admin): the bot
 * signature, then the bot's own bucket, then its nonce, unless the route records the nonce with its
 * own write (`config.recordsNonce`): a request refused before that writes nothing.
 */
export function botCheck(auth: BotAuthenticator, rateLimit: RateLimitGuard) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    let verified: { botId: string; nonce: string };
    try {
      verified = await auth.verify(request);
    } catch (error) {
      // Failed signatures cost the client address, so guessing is rate limited too.
      await rateLimit.enforce(request, reply, addressKey(request.ip));
      throw error;
    }
    request.botId = verified.botId;
    await rateLimit.enforce(request, reply, `bot:${verified.botId}`);
    if (request.routeOptions.config.recordsNonce) request.botNonce = verified.nonce;
    else await auth.recordNonce(request, verified.nonce);
  };
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The handler records the bot's nonce in its own transaction (enrichment requests). */
    recordsNonce?: boolean;
  }
}

interface RouteDeps {
  bots: BotService;
  matches: MatchService;
  requests: EnrichmentRequests;
  /** A match's enrichment as `bot` sees it (none: an admin). */
  status: (matchId: string, bot?: string) => Promise<EnrichmentStatus>;
  auth: BotAuthenticator;
  onEnqueued: () => void;
}

export function enrichmentRoutes(server: FastifyInstance, deps: RouteDeps): void {
  botAdminRoutes(server, deps);
  matchRoutes(server, deps);
  botRoutes(server, deps);
}

function botAdminRoutes(server: FastifyInstance, deps: RouteDeps): void {
  const app = withSchemaTypes(server);
  const { bots, requests } = deps;

  const botWithSecret = {
    type: 'object',
    required: ['id', 'name', 'shared_secret'],
    properties: { id: { type: 'string' }, name: { type: 'string' }, shared_secret: { type: 'string' }, previous_secret_expires_at: { type: 'string' } },
  } as const;
  app.post(
    '/api/bots',
    {
      config: { problems: ['conflict'] },
      schema: {
        operationId: 'createBot',
        tags: ['bots'],
        summary: 'Create a bot; the shared secret is shown once',
        body: { type: 'object', required: ['name'], additionalProperties: false, properties: { id: idString, name: nameString } },
        response: { 201: botWithSecret },
      },
    },
    async (request, reply) => reply.code(201).send(await bots.create(request.body)),
  );
  const botSchema = {
    type: 'object',
    properties: {
      id: { type: 'string' },
      name: { type: 'string' },
      created_at: { type: 'string' },
      previous_secret_expires_at: { type: ['string', 'null'] },
      quota: {
        type: 'object',
        description: 'Enrichment requests counted in the rolling 24 h window, of the daily limit',
        properties: { used: { type: 'integer' }, limit: { type: 'integer' } },
      },
    },
  } as const;
  app.get(
    '/api/bots',
    {
      schema: {
        operationId: 'listBots',
        tags: ['bots'],
        summary: 'Every bot with its quota use (secrets are never returned)',
        response: { 200: { type: 'array', items: botSchema } },
      },
    },
    async () => {
      const [all, use] = await Promise.all([bots.list(), requests.quotaUse()]);
      return all.map((bot) => ({ ...bot, quota: { used: use.get(bot.id) ?? 0, limit: DAILY_QUOTA } }));
    },
  );
  app.delete(
    '/api/bots/:id',
    {
      schema: {
        operationId: 'deleteBot',
        summary: `Delete a bot; its signatures stop working (on other instances within ${SECRET_CACHE_MS / 1000} s)`,
        tags: ['bots'],
        params: idParams,
        response: noContent('Deleted'),
      },
    },
    async (request, reply) => {
      await bots.remove(request.params.id);
      return reply.code(204).send();
    },
  );
  app.post(
    '/api/bots/:id/rotate-secret',
    {
      schema: {
        operationId: 'rotateBotSecret',
        tags: ['bots'],
        summary: 'New shared secret; the previous one keeps working for 24 h',
        params: idParams,
        response: { 200: botWithSecret },
      },
    },
    (request) => bots.rotate(request.params.id),
  );
}

function matchRoutes(server: FastifyInstance, deps: RouteDeps): void {
  const app = withSchemaTypes(server);
  const { matches } = deps;
  app.post(
    '/api/matches',
    {
      config: { problems: ['conflict'] },
      schema: {
        operationId: 'createMatch',
        summary: 'Create a match',
        tags: ['matches'],
        description: "The replay is checked against the configured generator's rule (docs/enrichment.md): a 400 names the field.",
        body: {
          type: 'object',
          required: ['status'],
          additionalProperties: false,
          properties: { id: idString, status: { type: 'string', enum: MATCH_STATUSES }, replay: replaySchema },
        },
        response: { 201: matchSchema },
      },
    },
    async (request, reply) => reply.code(201).send(await matches.create(request.body)),
  );
  app.get(
    '/api/matches',
    {
      config: { rateLimit: { scale: perPage(RECORD_PAGE) } },
      schema: {
        operationId: 'listMatches',
        summary: 'The matches created last, newest first, with their enrichment state',
        tags: ['matches'],
        querystring: { type: 'object', additionalProperties: false, properties: { limit: pageLimit(RECORD_PAGE) } },
        response: { 200: { type: 'array', items: matchSchema } },
      },
    },
    (request) => matches.list(request.query.limit),
  );
  app.get(
    '/api/matches/:id',
    {
      schema: { operationId: 'getMatch', summary: 'One match with its enrichment state', tags: ['matches'], params: idParams, response: { 200: matchSchema } },
    },
    (request) => matches.get(request.params.id),
  );
  app.patch(
    '/api/matches/:id',
    {
      schema: {
        operationId: 'updateMatch',
        summary: 'Change a match: its status or its replay',
        tags: ['matches'],
        params: idParams,
        body: { type: 'object', additionalProperties: false, properties: { status: { type: 'string', enum: MATCH_STATUSES }, replay: replaySchema } },
        response: { 200: matchSchema },
      },
    },
    (request) => matches.update(request.params.id, request.body),
  );
}

function botRoutes(server: FastifyInstance, deps: RouteDeps): void {
  const app = withSchemaTypes(server);
  app.post(
    '/api/request-enrichment',
    {
      config: { auth: 'bot', recordsNonce: true, problems: ['match_not_found', 'match_not_completed', 'replay_unusable', 'replay_invalid', 'quota_exceeded'] },
      bodyLimit: ENRICHMENT_REQUEST_LIMIT,
      schema: {
        operationId: 'requestEnrichment',
        tags: ['enrichment'],
        summary: `Request AI commentary for a completed match (bot-signed; ${DAILY_QUOTA} per bot per rolling 24 h)`,
        description: `The body is at most ${ENRICHMENT_REQUEST_LIMIT} bytes (413 above).`,
        body: { type: 'object', required: ['match_id'], additionalProperties: false, properties: { match_id: idString } },
        response: {
          202: {
            type: 'object',
            properties: {
              match_id: { type: 'string' },
              job_id: { type: 'integer' },
              status: { type: 'string', enum: ['queued', 'running', 'completed', 'failed'] },
              duplicate: { type: 'boolean' },
              requested_at: { type: 'string' },
              estimated_wait_seconds: { type: 'integer' },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const { match_id: matchId } = request.body;
      try {
        const result = await deps.requests.request(request.botId!, matchId, request.botNonce);
        quotaHeaders(reply, result.quota_remaining, result.quota_reset_seconds);
        if (!result.duplicate) deps.onEnqueued();
        if (result.own) reply.header('location', `/api/matches/${matchId}/enrichment`);
        return reply.code(202).send(result);
      } catch (error) {
        if (error instanceof DomainError && error.code === 'quota_exceeded') {
          const reset = error.retryAfterSeconds!;
          quotaHeaders(reply, 0, reset);
          reply.header('x-quota-remaining', '0').header('x-quota-reset', String(reset));
        }
        // Log why, as the bot check does.
        if (error instanceof BotRefused) throw deps.auth.refusedBot(request, error.reason);
        throw error;
      }
    },
  );

  app.get(
    '/api/matches/:id/enrichment',
    {
      config: { auth: 'admin_or_bot' },
      schema: {
        operationId: 'getMatchEnrichment',
        tags: ['enrichment'],
        summary: 'Enrichment status and commentary of a match (bot-signed or admin)',
        params: idParams,
        response: {
          200: {
            type: 'object',
            properties: {
              status: { type: ['string', 'null'] },
              estimated_wait_seconds: { type: 'integer' },
              commentary: { type: ['string', 'null'] },
              error: { type: ['string', 'null'] },
            },
          },
        },
      },
    },
    (request) => deps.status(request.params.id, request.isAdmin ? undefined : request.botId),
  );
}
