import type { FastifyInstance } from 'fastify';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { openApiSecurity, SESSION_COOKIE } from './auth.js';
import { DOCUMENT_HEADERS } from './header-policy.js';
import { errorCodes, problemResponses, requireAnsweredFields } from './openapi.js';

/** How each credential is sent: the OpenAPI security schemes every operation's `security` names. */
const SECURITY_SCHEMES = {
  admin: {
    type: 'http',
    scheme: 'bearer',
    description:
      'The admin token (ADMIN_TOKEN or DATA_DIR/admin-token), or an API token (mst_..., POST /api/tokens) of one of the scopes the operation lists: `ingest` (events and heartbeats), `read` (GET and HEAD), `ci` (push and read baselines), `admin` (everything). A token without the scope gets 403 naming the scope needed.',
  },
  session: {
    type: 'apiKey',
    in: 'cookie',
    name: SESSION_COOKIE,
    description:
      'The dashboard session from POST /api/session; honoured on same-origin requests only. The operation lists the roles it accepts: `admin`, `household`.',
  },
  // A bot request carries four headers, all required: one requirement naming the four schemes.
  botId: { type: 'apiKey', in: 'header', name: 'X-Bot-Id', description: 'The bot id' },
  botTimestamp: { type: 'apiKey', in: 'header', name: 'X-Bot-Timestamp', description: 'Unix seconds, within 300 s of the server clock' },
  botNonce: { type: 'apiKey', in: 'header', name: 'X-Bot-Nonce', description: '16 to 64 characters of [A-Za-z0-9_-], never reused within 11 minutes' },
  botSignature: {
    type: 'apiKey',
    in: 'header',
    name: 'X-Bot-Signature',
    description:
      'v1=<lowercase hex HMAC-SHA256, keyed with the shared secret, of "v1\\n" + METHOD + "\\n" + PATH_AND_QUERY + "\\n" + X-Bot-Timestamp + "\\n" + X-Bot-Nonce + "\\n" + hex(sha256(raw body))>; ' +
      'e.g. for POST /api/request-enrichment at 1795300000 with nonce 3f9c2a7b1d8e4f60aa11: "v1\\nPOST\\n/api/request-enrichment\\n1795300000\\n3f9c2a7b1d8e4f60aa11\\n<sha256 hex of the body>". ' +
      'Several space-separated entries are allowed (any one may match). Every failure is the same 401. See docs/enrichment.md.',
  },
} as const;

/** Swagger UI's own scripts and styles; it sets element styles at run time, hence 'unsafe-inline' for styles only. */
const DOCS_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/**
 * The OpenAPI 3.1 document generated from the route schemas (`/openapi.json`, Swagger UI at `/docs`):
 * each operation's `security` from its route's auth, its error responses from the problem registry.
 */
export async function apiDocs(app: FastifyInstance, version: string): Promise<void> {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      // Relative: the document describes whichever host served it, behind any proxy (docs/api.md).
      servers: [{ url: '/' }],
      info: {
        title: 'Mothership',
        version,
        description: 'Benchmark baselines, presence and home automation integration, signed enrichment requests. See docs/api.md.',
      },
      components: { securitySchemes: SECURITY_SCHEMES, schemas: {} },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, index) => String(json.$id ?? `def-${index}`) },
    transform: ({ schema, url, route }) => {
      const method = [route.method].flat()[0]!;
      const security = route.config?.auth && openApiSecurity({ ...route.config, auth: route.config.auth }, method, route.url);
      // Error responses are added to the document only: a route's own response schemas also drive serialization.
      const response = { ...problemResponses(errorCodes(method, url, schema, route.config)), ...requireAnsweredFields((schema?.response as object) ?? {}) };
      // A public route says so (`security: []`) rather than leaving a reader to guess.
      return { schema: { ...(schema ?? {}), response, security: security ?? [] } as typeof schema, url };
    },
  });
  await app.register(async (pages) => {
    // Swagger UI's routes serve pages: the document policy (header-policy.ts), its CSP replaced by staticCSP.
    pages.addHook('onRoute', (route) => void (route.config = { ...route.config, policyHeaders: DOCUMENT_HEADERS }));
    await pages.register(swaggerUi, { routePrefix: '/docs', staticCSP: DOCS_CSP });
  });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
