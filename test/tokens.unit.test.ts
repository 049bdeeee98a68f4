import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { openApiSecurity, tokenScopes } from '../src/http/auth.js';
import { sessionRoles } from '../src/http/roles.js';

describe('which API-token scopes a route accepts (tokenScopes)', () => {
  it('ingest routes take ingest and admin tokens; other admin routes read tokens on GET and HEAD only', () => {
    assert.deepEqual(tokenScopes('ingest', 'POST'), ['ingest', 'admin']);
    assert.deepEqual(tokenScopes('admin', 'GET'), ['read', 'admin']);
    assert.deepEqual(tokenScopes('admin', 'HEAD'), ['read', 'admin']);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) assert.deepEqual(tokenScopes('admin', method), ['admin'], method);
    assert.deepEqual(tokenScopes('admin_or_bot', 'GET'), ['read', 'admin']);
  });

  it('ci routes (the baselines) take ci tokens, for reads and writes, besides what every admin route takes', () => {
    assert.deepEqual(tokenScopes('ci', 'POST'), ['ci', 'admin']);
    assert.deepEqual(tokenScopes('ci', 'GET'), ['ci', 'read', 'admin']);
    for (const mode of ['admin', 'ingest', 'admin_or_bot'] as const)
      for (const method of ['GET', 'POST', 'DELETE']) assert.ok(!tokenScopes(mode, method).includes('ci'), `${mode} ${method}`);
  });

  it('a household session may use the Overview, People and Nodes routes and its own sessions; every other route needs an admin', () => {
    assert.deepEqual(sessionRoles('GET', '/api/persons'), ['admin', 'household']);
    assert.deepEqual(sessionRoles('HEAD', '/api/persons'), ['admin', 'household']);
    assert.deepEqual(sessionRoles('PATCH', '/api/nodes/:id'), ['admin', 'household']);
    assert.deepEqual(sessionRoles('POST', '/api/events'), ['admin', 'household']);
    for (const route of [
      'GET /api/settings/integration',
      'POST /api/tokens',
      'GET /api/tokens',
      'POST /api/bots',
      'POST /api/baselines',
      'GET /api/users',
      'POST /api/nodes/:id/heartbeat',
    ]) {
      const [method, url] = route.split(' ') as [string, string];
      assert.deepEqual(sessionRoles(method, url), ['admin'], route);
    }
  });

  it('routes without admin access take no token at all', () => {
    assert.deepEqual(tokenScopes('public', 'GET'), []);
    assert.deepEqual(tokenScopes('bot', 'POST'), []);
  });

  it('the OpenAPI security names the scopes in the admin requirement, beside the session and the bot signature', () => {
    assert.deepEqual(openApiSecurity({ auth: 'ingest' }, 'POST', '/api/events'), [{ admin: ['ingest', 'admin'] }, { session: ['admin', 'household'] }]);
    assert.deepEqual(openApiSecurity({ auth: 'ci' }, 'POST', '/api/baselines'), [{ admin: ['ci', 'admin'] }, { session: ['admin'] }]);
    assert.deepEqual(openApiSecurity({ auth: 'admin_or_bot' }, 'GET', '/api/matches/:id/enrichment'), [
      { admin: ['read', 'admin'] },
      { session: ['admin'] },
      { botId: [], botTimestamp: [], botNonce: [], botSignature: [] },
    ]);
    assert.equal(openApiSecurity({ auth: 'public' }, 'GET', '/healthz'), undefined);
    assert.deepEqual(openApiSecurity({ auth: 'admin', tokenScopes: ['admin'] }, 'GET', '/api/session'), [
      { admin: ['admin'] },
      { session: ['admin', 'household'] },
    ]);
  });
});
