import type { FastifyInstance, FastifyReply } from 'fastify';
import {
  eventPayloadSchema,
  idParams,
  idString,
  jsonObject,
  nameString,
  noContent,
  nullableString,
  pageLimit,
  perPage,
  type ProblemCode,
  requestClient,
  withSchemaTypes,
} from '../http/index.js';
import { JSON_LIMITS, LIST_PAGE, NODE_PAGE, type PageSize, TEXT_LIMITS } from '../limits.js';
import { MODES, type Page, type PersonView, type PresenceService } from './service.js';
import { reportedPresence } from './transitions.js';

const personSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    presence: { type: 'string', enum: ['home', 'not_home', 'unknown'], description: 'unknown until the first zone entry or exit' },
    zone: { type: ['string', 'null'] },
    last_seen: { type: ['string', 'null'] },
  },
} as const;

const zoneSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    name: { type: 'string' },
    count: { type: 'integer' },
    occupied: { type: 'boolean' },
    occupants: { type: 'array', items: { type: 'string' } },
  },
} as const;

const duplicateName = {
  type: 'boolean',
  description: 'true: derive an id from a name another record already has (bob-2); otherwise that is a 409 naming /name',
} as const;

const createBody = {
  type: 'object',
  required: ['name'],
  additionalProperties: false,
  properties: { id: idString, name: nameString, duplicate_name: duplicateName },
} as const;

const patchBody = { type: 'object', additionalProperties: false, properties: { name: nameString } } as const;

/** The query of a cursor-paged list: `limit` records after `cursor` (an id), in id order. */
const pageQuery = (size: PageSize) =>
  ({
    type: 'object',
    additionalProperties: false,
    properties: {
      limit: pageLimit(size),
      cursor: { ...idString, description: 'The last id of the previous page (from its Link header)' },
    },
  }) as const;

const pageDescription = (size: PageSize) =>
  `\`limit\` records (default ${size.default}, at most ${size.max}) after \`cursor\`, in id order; when more follow, the \`Link\` header names the next page (\`rel="next"\`), whose \`cursor\` is this page's last id.`;

const linkHeader = (path: string) => ({
  link: { type: 'string', description: `RFC 8288: \`<${path}?limit=..&cursor=..>; rel="next"\` while more follow` },
});

/** Sends a page's items, with the Link header of the next page while there is one. */
function sendPage<T>(reply: FastifyReply, path: string, limit: number, page: Page<T>): T[] {
  if (page.next !== null) reply.header('link', `<${path}?${new URLSearchParams({ limit: String(limit), cursor: page.next })}>; rel="next"`);
  return page.items;
}

/** A person as the API answers: presence `unknown` until the first entry or exit. */
const personAnswer = (person: PersonView) => ({ ...person, presence: reportedPresence(person) });

const optionalRefs = { person: idString, zone: idString, blob_id: { type: 'string', minLength: 1, maxLength: TEXT_LIMITS.blob_id } } as const;

// The types POST /api/events accepts, each named once: the body's enum is their union.
const MOVES = ['zone.entry', 'zone.exit'] as const;
const FALLS = ['fall.detected', 'fall.cleared'] as const;
const ANOMALIES = ['anomaly.detected'] as const;

/** The body of POST /api/events: one schema per event type, chosen by `type`. */
const sensingEventBody = {
  type: 'object',
  required: ['type'],
  properties: { type: { type: 'string', enum: [...MOVES, ...FALLS, ...ANOMALIES] } },
  allOf: [
    {
      if: { properties: { type: { enum: MOVES } } },
      then: { required: ['person', 'zone'], additionalProperties: false, properties: { type: {}, ...optionalRefs } },
    },
    {
      if: { properties: { type: { enum: FALLS } } },
      then: { additionalProperties: false, properties: { type: {}, ...optionalRefs } },
    },
    {
      if: { properties: { type: { enum: ANOMALIES } } },
      then: {
        additionalProperties: false,
        properties: {
          type: {},
          ...optionalRefs,
          severity: { type: 'string', enum: ['info', 'warning', 'critical'] },
          detail: { ...jsonObject(JSON_LIMITS.detail, 'What the sensing node reports, stored and delivered as sent.'), maxProperties: 64 },
        },
      },
    },
  ],
} as const;

/** A CRUD resource (persons, zones): list, create, get, patch, delete under one prefix. */
function crudRoutes<View>(
  server: FastifyInstance,
  options: {
    path: string;
    tag: string;
    /** The resource's name, singular, capitalised: the operation ids and summaries say it (`listPersons`). */
    noun: string;
    /** What a create is refused with when the installation holds its limit of these. */
    limitReached: ProblemCode;
    schema: object;
    list: (page: { limit: number; cursor?: string }) => Promise<Page<View>>;
    get: (id: string) => Promise<View>;
    create: (body: { id?: string; name: string; duplicate_name?: boolean }) => Promise<View>;
    update: (id: string, body: { name?: string }) => Promise<View>;
    remove: (id: string) => Promise<void>;
  },
): void {
  const { path, tag, schema, noun } = options;
  const tags = [tag];
  const nouns = `${noun}s`;
  const app = withSchemaTypes(server);
  app.get(
    path,
    {
      config: { rateLimit: { scale: perPage(LIST_PAGE) } },
      schema: {
        operationId: `list${nouns}`,
        summary: `The ${nouns.toLowerCase()}, a page at a time`,
        tags,
        description: pageDescription(LIST_PAGE),
        querystring: pageQuery(LIST_PAGE),
        response: { 200: { type: 'array', items: schema, headers: linkHeader(path) } },
      },
    },
    async (request, reply) => sendPage(reply, path, request.query.limit, await options.list(request.query)),
  );
  app.post(
    path,
    {
      config: { problems: ['conflict', options.limitReached] },
      schema: { operationId: `create${noun}`, summary: `Create a ${noun.toLowerCase()}`, tags, body: createBody, response: { 201: schema } },
    },
    async (request, reply) => reply.code(201).send(await options.create(request.body)),
  );
  app.get(
    `${path}/:id`,
    { schema: { operationId: `get${noun}`, summary: `One ${noun.toLowerCase()}`, tags, params: idParams, response: { 200: schema } } },
    (request) => options.get(request.params.id),
  );
  app.patch(
    `${path}/:id`,
    { schema: { operationId: `update${noun}`, summary: `Rename a ${noun.toLowerCase()}`, tags, params: idParams, body: patchBody, response: { 200: schema } } },
    (request) => options.update(request.params.id, request.body),
  );
  app.delete(
    `${path}/:id`,
    { schema: { operationId: `delete${noun}`, summary: `Delete a ${noun.toLowerCase()}`, tags, params: idParams, response: noContent('Deleted') } },
    async (request, reply) => {
      await options.remove(request.params.id);
      return reply.code(204).send();
    },
  );
}

export function presenceRoutes(server: FastifyInstance, presence: PresenceService): void {
  const app = withSchemaTypes(server);
  crudRoutes(app, {
    path: '/api/persons',
    tag: 'persons',
    noun: 'Person',
    limitReached: 'person_limit_reached',
    schema: personSchema,
    list: async (page) => {
      const { items, next } = await presence.personsPage(page);
      return { items: items.map(personAnswer), next };
    },
    get: async (id) => personAnswer(await presence.getPerson(id)),
    create: async (body) => personAnswer(await presence.createPerson(body)),
    update: async (id, body) => personAnswer(await presence.updatePerson(id, body)),
    remove: (id) => presence.deletePerson(id),
  });
  crudRoutes(app, {
    path: '/api/zones',
    tag: 'zones',
    noun: 'Zone',
    limitReached: 'zone_limit_reached',
    schema: zoneSchema,
    list: (page) => presence.zonesPage(page),
    get: (id) => presence.getZone(id),
    create: (body) => presence.createZone(body),
    update: (id, body) => presence.updateZone(id, body),
    remove: (id) => presence.deleteZone(id),
  });

  app.post(
    '/api/nodes/:id/heartbeat',
    {
      schema: {
        operationId: 'recordHeartbeat',
        summary: 'A sensing node reports it is alive, with its signal quality',
        tags: ['system'],
        params: idParams,
        body: { type: 'object', required: ['quality'], additionalProperties: false, properties: { quality: { type: 'number', minimum: 0, maximum: 100 } } },
        response: noContent('Recorded; the node is registered on its first heartbeat'),
      },
      config: { auth: 'ingest', problems: ['node_limit_reached'] },
    },
    async (request, reply) => {
      await presence.heartbeat(request.params.id, request.body.quality, requestClient(request));
      return reply.code(204).send();
    },
  );

  const nodeSchema = {
    type: 'object',
    properties: {
      id: { type: 'string' },
      name: { ...nullableString, description: 'Set with PATCH; null: unnamed' },
      zone: { ...nullableString, description: 'The zone the node is placed in, or null' },
      quality: { type: 'number' },
      last_seen: { type: 'string' },
      online: { type: 'boolean' },
    },
  } as const;
  const nodeTags = ['system'];
  app.get(
    '/api/nodes',
    {
      config: { rateLimit: { scale: perPage(NODE_PAGE) } },
      schema: {
        operationId: 'listNodes',
        tags: nodeTags,
        summary:
          'Every node that sent a heartbeat, in id order, a page at a time: its last heartbeat, its quality, and whether it is online (a heartbeat within NODE_TIMEOUT_MS)',
        description: pageDescription(NODE_PAGE),
        querystring: pageQuery(NODE_PAGE),
        response: { 200: { type: 'array', items: nodeSchema, headers: linkHeader('/api/nodes') } },
      },
    },
    async (request, reply) => sendPage(reply, '/api/nodes', request.query.limit, await presence.listNodes(request.query)),
  );
  app.get(
    '/api/nodes/:id',
    { schema: { operationId: 'getNode', summary: 'One sensing node', tags: nodeTags, params: idParams, response: { 200: nodeSchema } } },
    (request) => presence.getNode(request.params.id),
  );
  app.patch(
    '/api/nodes/:id',
    {
      schema: {
        operationId: 'updateNode',
        tags: nodeTags,
        summary: 'Rename a node or place it in a zone (zone null: in none)',
        params: idParams,
        body: { type: 'object', additionalProperties: false, properties: { name: nameString, zone: { anyOf: [idString, { type: 'null' }] } } },
        response: { 200: nodeSchema },
      },
    },
    (request) => presence.updateNode(request.params.id, request.body),
  );
  app.delete(
    '/api/nodes/:id',
    {
      schema: {
        operationId: 'deleteNode',
        tags: nodeTags,
        summary: 'Forget a node (a heartbeat registers it again, within NODE_LIMIT)',
        params: idParams,
        response: noContent('Deleted'),
      },
    },
    async (request, reply) => {
      await presence.deleteNode(request.params.id);
      return reply.code(204).send();
    },
  );

  const healthSchema = {
    type: 'object',
    properties: { node_count: { type: 'integer' }, quality: { type: ['number', 'null'] }, mode: { type: 'string' } },
  } as const;
  app.get(
    '/api/system/health',
    { schema: { operationId: 'getSystemHealth', summary: 'Node count, signal quality and system mode', tags: ['system'], response: { 200: healthSchema } } },
    () => presence.health(),
  );

  const modeSchema = { type: 'object', required: ['mode'], additionalProperties: false, properties: { mode: { type: 'string', enum: MODES } } } as const;
  app.get(
    '/api/system/fall',
    {
      schema: {
        operationId: 'getFallState',
        tags: ['system'],
        summary: 'The fall state: ON from a fall.detected until a fall.cleared (who, where, since when)',
        response: {
          200: {
            type: 'object',
            properties: { state: { type: 'string', enum: ['ON', 'OFF'] }, person: nullableString, zone: nullableString, timestamp: nullableString },
          },
        },
      },
    },
    () => presence.fallState(),
  );
  app.get(
    '/api/system/mode',
    { schema: { operationId: 'getSystemMode', summary: 'The system mode', tags: ['system'], response: { 200: modeSchema } } },
    async () => ({ mode: await presence.mode() }),
  );
  app.put(
    '/api/system/mode',
    { schema: { operationId: 'setSystemMode', summary: 'Set the system mode', tags: ['system'], body: modeSchema, response: { 200: modeSchema } } },
    async (request) => ({
      mode: await presence.setMode(request.body.mode, 'api'),
    }),
  );

  app.post(
    '/api/events',
    {
      // A `person` or `zone` that does not exist.
      config: { auth: 'ingest', problems: ['not_found'] },
      schema: {
        operationId: 'createEvent',
        tags: ['events'],
        summary: 'Ingest a sensing event (zone entry/exit, fall, anomaly)',
        body: sensingEventBody,
        response: { 202: { type: 'object', properties: { event: eventPayloadSchema } } },
      },
    },
    async (request, reply) => reply.code(202).send({ event: await presence.ingest(request.body, requestClient(request)) }),
  );
}
