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
    /** A route that serves pages: the document policy, with these overrides (the dashboard's page CSP; `{}`: none). */
    headerPolicy?: HeaderPolicy;
    /** The route's headers, computed once from the policy and its override (set when the route is added). */
    policyHeaders?: Readonly<Record<string, string>>;
  }
}

/**
 * The policy of a page a browser renders (the dashboard, /docs, a problem's page): helmet's whole
 * set. A page widens its CSP with a route's `config.headerPolicy`. No HSTS: TLS is a reverse proxy's
 * business here, and a LAN install on plain HTTP must keep working.
 */
const DOCUMENT_POLICY: HeaderPolicy = {
  contentSecurityPolicy: {
    useDefaults: false,
    directives: { defaultSrc: ["'none'"], frameAncestors: ["'none'"], baseUri: ["'none'"], formAction: ["'none'"] },
  },
  frameguard: { action: 'deny' },
  referrerPolicy: { policy: 'no-referrer' },
  strictTransportSecurity: false,
};

/**
 * Every other answer's (JSON, problem+json, an empty 204): the fields that act on any response (no
 * content at all, never framed, no sniffing, no cross-origin embedding, no referrer), without the six
 * that act only on a rendered page: COOP, Origin-Agent-Cluster, X-DNS-Prefetch-Control,
 * X-Download-Options, X-Permitted-Cross-Domain-Policies and X-XSS-Protection (after OWASP's REST
 * Security Cheat Sheet). Their bytes were a measured share of every request (bench/README.md).
 */
const API_POLICY = {
  ...DOCUMENT_POLICY,
  crossOriginOpenerPolicy: false,
  originAgentCluster: false,
  xDnsPrefetchControl: false,
  xDownloadOptions: false,
  xPermittedCrossDomainPolicies: false,
  xXssProtection: false,
} as HeaderPolicy;
export const POLICY_HEADERS = policyHeaders(API_POLICY);
/** The same, for the answers written to the socket before Fastify sees the request. */
export const POLICY_HEADER_LINES = Object.entries(POLICY_HEADERS)
  .map(([name, value]) => `${name}: ${value}\r\n`)
  .join('');
/** A page's headers when it does not widen its CSP (Swagger UI sets its own). */
export const DOCUMENT_HEADERS = policyHeaders(DOCUMENT_POLICY);

/** An `onRoute` hook's work: a page's route (one that names a policy) gets its headers computed once, here. */
export function routePolicyHeaders(route: { config?: { headerPolicy?: HeaderPolicy } }): Readonly<Record<string, string>> | undefined {
  const override = route.config?.headerPolicy;
  return override && policyHeaders({ ...DOCUMENT_POLICY, ...override } as HeaderPolicy);
}
