/** Dashboard users' roles and what each may call: the one rule RouteAuth enforces and the OpenAPI document lists. */

/** What a dashboard user may do: `admin` everything; `household` only the routes of HOUSEHOLD_ROUTES. */
export const ROLES = ['admin', 'household'] as const;
export type Role = (typeof ROLES)[number];

/**
 * What a `household` session may call, by method and route: the Overview (system, zones, people,
 * events), the People and Nodes pages, its own sessions, and clearing a fall. Everything else (settings,
 * the webhook, tokens, bots and matches, baselines, users) needs an admin. A function refines an entry
 * by the request's body: null lets it through, a string is the refusal. HEAD follows GET.
 */
export const HOUSEHOLD_ROUTES: Readonly<Record<string, true | ((body: unknown) => string | null)>> = {
  'GET /api/system/health': true,
  'GET /api/system/mode': true,
  'PUT /api/system/mode': true,
  'GET /api/system/fall': true,
  'GET /api/persons': true,
  'POST /api/persons': true,
  'GET /api/persons/:id': true,
  'PATCH /api/persons/:id': true,
  'DELETE /api/persons/:id': true,
  'GET /api/zones': true,
  'POST /api/zones': true,
  'GET /api/zones/:id': true,
  'PATCH /api/zones/:id': true,
  'DELETE /api/zones/:id': true,
  'GET /api/nodes': true,
  'GET /api/nodes/:id': true,
  'PATCH /api/nodes/:id': true,
  'GET /api/events': true,
  'GET /api/events/stream': true,
  'POST /api/events': (body) =>
    (body as { type?: unknown } | undefined)?.type === 'fall.cleared'
      ? null
      : 'A household account may post only fall.cleared (Mark as cleared); sensing events come from the nodes, with an ingest token',
  'GET /api/session': true,
  'GET /api/sessions': true,
  'DELETE /api/sessions': true,
  'DELETE /api/sessions/:id': true,
};

/** The household entry of a route (HEAD as its GET), or undefined when a household session may not call it. */
export function householdEntry(method: string, url: string) {
  return HOUSEHOLD_ROUTES[`${method === 'HEAD' ? 'GET' : method} ${url}`];
}

/** The roles whose sessions may call `method url` (before any refinement by the body). */
export function sessionRoles(method: string, url: string): Role[] {
  return householdEntry(method, url) ? ['admin', 'household'] : ['admin'];
}
