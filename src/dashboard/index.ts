import { readFileSync, readdirSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { EVENT_GROUPS, EVENT_TYPES } from '../events/index.js';
import { withSchemaTypes } from '../http/index.js';
import { nameKey } from '../presence/index.js';

/** The dashboard's files, shipped as written (no build step), read once at the first request for one (start-up does not need them). */
const PUBLIC_DIR = new URL('../../../src/dashboard/public/', import.meta.url);
const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

// The page's override of the server-wide header policy (http/header-policy.ts): everything it loads comes
// from this server; no inline script, no third party, never framed.
const DASHBOARD_CSP = {
  useDefaults: false as const,
  directives: {
    defaultSrc: ["'self'"],
    scriptSrc: ["'self'"],
    styleSrc: ["'self'"],
    imgSrc: ["'self'", 'data:'],
    connectSrc: ["'self'"],
    frameAncestors: ["'none'"],
    baseUri: ["'none'"],
    formAction: ["'self'"],
  },
};

export function dashboardRoutes(server: FastifyInstance): void {
  const app = withSchemaTypes(server);
  let loaded: Map<string, { body: Buffer; type: string }> | null = null;
  const files = () => {
    if (loaded) return loaded;
    loaded = new Map();
    for (const name of readdirSync(PUBLIC_DIR)) {
      const extension = name.slice(name.lastIndexOf('.'));
      if (TYPES[extension]) loaded.set(name, { body: readFileSync(new URL(name, PUBLIC_DIR)), type: TYPES[extension]! });
    }
    // Generated from the one list (events/types.ts): the page subscribes to every type the stream sends, and filters by group.
    const eventTypes = `export const EVENT_TYPES = ${JSON.stringify(EVENT_TYPES)};\nexport const EVENT_GROUPS = ${JSON.stringify(EVENT_GROUPS)};\n`;
    loaded.set('event-types.js', { body: Buffer.from(eventTypes), type: TYPES['.js']! });
    // The page marks people who share a name by the rule the service refuses duplicates with: its own code.
    loaded.set('name-key.js', { body: Buffer.from(`export const nameKey = ${nameKey.toString()};\n`), type: TYPES['.js']! });
    return loaded;
  };
  const options = {
    config: { auth: 'public' as const, rateLimit: false as const, headerPolicy: { contentSecurityPolicy: DASHBOARD_CSP } },
    schema: { hide: true },
  };
  const fileParams = { type: 'object', required: ['file'], properties: { file: { type: 'string' } } } as const;

  app.get('/', options, async (_request, reply) => {
    const page = files().get('index.html')!;
    return reply.type(page.type).header('cache-control', 'no-cache').send(page.body);
  });
  app.get('/dashboard/:file', { ...options, schema: { ...options.schema, params: fileParams } }, async (request, reply) => {
    const file = files().get(request.params.file);
    if (!file) return reply.callNotFound();
    return reply.type(file.type).header('cache-control', 'no-cache').send(file.body);
  });
}
