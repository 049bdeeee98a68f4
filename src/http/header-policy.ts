import type { IncomingMessage, ServerResponse } from 'node:http';
import helmet from 'helmet';

/** helmet's options (its ESM and CommonJS type declarations describe them twice; this names one). */
export type HeaderPolicy = NonNullable<Parameters<typeof helmet>[0]>;

/**
 * The response headers a helmet policy sets, computed once. helmet stays the owner of what the
 * headers say; applying them is then one object copy per response. (@fastify/helmet builds the
 * helmet middleware again on every request, which cost a quarter of a bare route's throughput.)
 */
export function policyHeaders(policy: HeaderPolicy): Readonly<Record<string, string>> {
  const headers: Record<string, string> = {};
  const response = {
    setHeader: (name: string, value: string | number | readonly string[]) => void (headers[name.toLowerCase()] = String(value)),
    removeHeader: () => {},
  };
  helmet(policy)({} as IncomingMessage, response as unknown as ServerResponse, () => {});
  return Object.freeze(headers);
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Overrides of the server-wide header policy for this route (the dashboard's page CSP). */
    headerPolicy?: HeaderPolicy;
    /** The route's headers, computed once from the policy and its override (set when the route is added). */
    policyHeaders?: Readonly<Record<string, string>>;
  }
}

/**
 * One header policy on every response. An API answer needs no content at all; the dashboard and
 * /docs widen the CSP for their pages (a route's `config.headerPolicy`). No HSTS: TLS is a reverse
 * proxy's business here, and a LAN install on plain HTTP must keep working.
 */
export const HEADER_POLICY: HeaderPolicy = {
  contentSecurityPolicy: {
    useDefaults: false,
    directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"], baseUri: ["'none'"], formAction: ["'none'"] },
  },
  frameguard: { action: 'deny' },
  referrerPolicy: { policy: 'no-referrer' },
  strictTransportSecurity: false,
};
export const POLICY_HEADERS = policyHeaders(HEADER_POLICY);
/** The same, for the answers written to the socket before Fastify sees the request. */
export const POLICY_HEADER_LINES = Object.entries(POLICY_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');

/** An `onRoute` hook's work: a route that overrides the policy gets its headers computed once, here. */
export function routePolicyHeaders(route: { config?: { headerPolicy?: HeaderPolicy } }): Readonly<Record<string, string>> | undefined {
  const override = route.config?.headerPolicy;
  return override && policyHeaders({ ...HEADER_POLICY, ...override } as HeaderPolicy);
}
