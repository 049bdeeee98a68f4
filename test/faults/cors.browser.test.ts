import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.js';
import { launchChromium, signInWithToken } from '../helpers/browser.js';

/** A blank page served from its own port: another origin than the service's. */
async function originServer(): Promise<{ server: http.Server; origin: string }> {
  const server = http.createServer((_request, response) => response.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>page</title>'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/**
 * CORS_ORIGINS in a real browser: a page on an allowed origin reads and writes the API with a bearer
 * token (the write after a preflight); a page on another origin cannot read it; the dashboard
 * session is never accepted from another origin, allowed or not.
 */
describe('CORS from pages on other origins in Chromium', () => {
  let app: TestApp;
  let browser: Browser;
  let context: BrowserContext;
  let base: string;
  let allowed: Awaited<ReturnType<typeof originServer>>;
  let other: Awaited<ReturnType<typeof originServer>>;

  before(async () => {
    allowed = await originServer();
    other = await originServer();
    app = await startTestApp('sqlite', { CORS_ORIGINS: allowed.origin });
    base = await app.http.listen({ port: 0, host: '127.0.0.1' });
    browser = await launchChromium();
    context = await browser.newContext();
  });
  after(async () => {
    await browser?.close();
    await app?.cleanup();
    allowed?.server.close();
    other?.server.close();
  });

  const pageAt = async (origin: string): Promise<Page> => {
    const page = await context.newPage();
    await page.goto(origin + '/');
    return page;
  };
  /** A fetch from the page: its status and body, or the browser's refusal. */
  const fetchFrom = (page: Page, path: string, init: Record<string, unknown>) =>
    page.evaluate(
      async ([url, init]) => {
        try {
          const response = await fetch(url as string, init as RequestInit);
          return { status: response.status, body: await response.text(), limit: response.headers.get('ratelimit') };
        } catch (error) {
          return { refused: String(error) };
        }
      },
      [base + path, init] as const,
    );
  const bearer = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const statusCount = async (route: string, method: string, statusClass: string) => {
    const line = ((await app.api('GET', '/metrics')).body as string)
      .split('\n')
      .find((candidate) => candidate.startsWith(`mothership_http_requests_total{route="${route}",method="${method}",status_class="${statusClass}"}`));
    return line ? Number(line.split(' ').at(-1)) : 0;
  };

  it('a page on an allowed origin reads and writes with a bearer token', async () => {
    const page = await pageAt(allowed.origin);
    const read = await fetchFrom(page, '/api/persons', { headers: bearer });
    assert.equal(read.status, 200, JSON.stringify(read));
    assert.ok(read.limit, 'the RateLimit field is exposed to the page');
    const write = await fetchFrom(page, '/api/persons', {
      method: 'POST',
      headers: { ...bearer, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'grace', name: 'Grace' }),
    });
    assert.equal(write.status, 201, JSON.stringify(write));
    assert.equal((await app.api('GET', '/api/persons/grace')).status, 200);
  });

  it('answers the preflight of an allowed origin with the methods of the path, without credentials', async () => {
    const preflight = await fetch(base + '/api/persons/grace', {
      method: 'OPTIONS',
      headers: { origin: allowed.origin, 'access-control-request-method': 'DELETE', 'access-control-request-headers': 'authorization' },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get('access-control-allow-origin'), allowed.origin);
    assert.match(preflight.headers.get('access-control-allow-methods') ?? '', /DELETE/);
    assert.match(preflight.headers.get('access-control-allow-headers') ?? '', /authorization/);
    assert.equal(preflight.headers.get('access-control-allow-credentials'), null);
    const foreign = await fetch(base + '/api/persons/grace', {
      method: 'OPTIONS',
      headers: { origin: other.origin, 'access-control-request-method': 'DELETE' },
    });
    assert.equal(foreign.status, 405);
    assert.equal(foreign.headers.get('access-control-allow-origin'), null);
  });

  it('a page on another origin cannot read the API, even with the token', async () => {
    const page = await pageAt(other.origin);
    const read = await fetchFrom(page, '/api/persons', { headers: bearer });
    assert.match(String(read.refused), /Failed to fetch/, JSON.stringify(read));
  });

  it('the dashboard session is never accepted from another origin, allowed or not', async () => {
    const dashboard = await context.newPage();
    await signInWithToken(dashboard, base, ADMIN_TOKEN);
    for (const origin of [allowed.origin, other.origin]) {
      const refusedBefore = await statusCount('/api/persons', 'GET', '4xx');
      const read = await fetchFrom(await pageAt(origin), '/api/persons', { credentials: 'include' });
      assert.match(String(read.refused), /Failed to fetch/, `${origin}: ${JSON.stringify(read)}`);
      // The browser sent the cookie (same site, other port); the service refused it, not just the browser.
      assert.equal(await statusCount('/api/persons', 'GET', '4xx'), refusedBefore + 1, origin);
    }
  });
});
