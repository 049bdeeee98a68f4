import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApp, type TestApp } from '../helpers/app.js';

/** Clickjacking and sniffing: one header policy on every response, the dashboard's CSP as its override. */
describe('security headers on every response', () => {
  let app: TestApp;
  before(async () => {
    app = await startTestApp('sqlite');
  });
  after(() => app.cleanup());

  const get = (url: string, headers: Record<string, string> = {}) => app.http.inject({ method: 'GET', url, headers });

  it('every kind of answer forbids framing and sniffing', async () => {
    const answers = {
      dashboard: await get('/'),
      'dashboard by file name': await get('/dashboard/index.html'),
      'dashboard script': await get('/dashboard/app.js'),
      docs: await get('/docs/'),
      'docs asset': await get('/docs/static/index.html'),
      openapi: await get('/openapi.json'),
      api: await get('/api/persons', { authorization: 'Bearer test-admin-token-0123456789' }),
      '401': await get('/api/persons'),
      '404': await get('/nothing-here'),
      health: await get('/healthz'),
      'bad encoding': await get('/api/%zz'),
    };
    for (const [what, response] of Object.entries(answers)) {
      assert.match(String(response.headers['content-security-policy']), /frame-ancestors 'none'/, `${what} (${response.statusCode})`);
      assert.equal(response.headers['x-frame-options'], 'DENY', what);
      assert.equal(response.headers['x-content-type-options'], 'nosniff', what);
    }
  });

  it('the dashboard gets its strict page policy under either URL; API answers allow no content at all', async () => {
    for (const url of ['/', '/dashboard/index.html']) {
      const csp = String((await get(url)).headers['content-security-policy']);
      assert.match(csp, /default-src 'self'/, url);
      assert.match(csp, /script-src 'self'(;|$)/, `${url}: no inline script`);
      assert.doesNotMatch(csp, /upgrade-insecure-requests/, `${url}: a LAN install on plain HTTP must keep working`);
    }
    assert.match(String((await get('/api/persons')).headers['content-security-policy']), /default-src 'none'/);
  });

  // Fields that act only on a page a browser renders (OWASP's REST Security Cheat Sheet): on pages, not on API answers.
  const PAGE_ONLY = [
    'cross-origin-opener-policy',
    'origin-agent-cluster',
    'x-dns-prefetch-control',
    'x-download-options',
    'x-permitted-cross-domain-policies',
    'x-xss-protection',
  ];

  it('pages carry the fields that act on a rendered page; API answers only those that act on any answer', async () => {
    const pages = {
      dashboard: await get('/'),
      'dashboard script': await get('/dashboard/app.js'),
      docs: await get('/docs/'),
      'docs asset': await get('/docs/static/swagger-ui.css'),
      'problem page': await get('/problems/not_found', { accept: 'text/html' }),
    };
    for (const [what, response] of Object.entries(pages)) {
      assert.equal(response.statusCode, 200, what);
      for (const name of PAGE_ONLY) assert.ok(response.headers[name], `${what}: ${name}`);
    }
    const answers = {
      api: await get('/api/persons', { authorization: 'Bearer test-admin-token-0123456789' }),
      '401': await get('/api/persons'),
      '404': await get('/nothing-here', { accept: 'text/html' }),
      health: await get('/healthz'),
      openapi: await get('/openapi.json'),
      'bad encoding': await get('/api/%zz'),
    };
    for (const [what, response] of Object.entries(answers)) {
      for (const name of PAGE_ONLY) assert.equal(response.headers[name], undefined, `${what}: ${name}`);
      assert.equal(response.headers['cross-origin-resource-policy'], 'same-origin', what);
      assert.equal(response.headers['referrer-policy'], 'no-referrer', what);
    }
  });
});
