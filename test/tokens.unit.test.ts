import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { openApiSecurity, tokenScopes } from '../src/http/auth.js';

describe('which API-token scopes a route accepts (tokenScopes)', () => {
  it('ingest routes take ingest and admin tokens; other admin routes read tokens on GET and HEAD only', () => {
    assert.deepEqual(tokenScopes('ingest', 'POST'), ['ingest', 'admin']);
    assert.deepEqual(tokenScopes('admin', 'GET'), ['read', 'admin']);
    assert.deepEqual(tokenScopes('admin', 'HEAD'), ['read', 'admin']);
    for (const method of ['POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']) assert.deepEqual(tokenScopes('admin', method), ['admin'], method);
    assert.deepEqual(tokenScopes('admin_or_bot', 'GET'), ['read', 'admin']);
  });

  it('routes without admin access take no token at all', () => {
    assert.deepEqual(tokenScopes('public', 'GET'), []);
    assert.deepEqual(tokenScopes('bot', 'POST'), []);
  });

  it('the OpenAPI security names the scopes in the admin requirement, beside the session and the bot signature', () => {
    assert.deepEqual(openApiSecurity('ingest', 'POST'), [{ admin: ['ingest', 'admin'] }, { session: [] }]);
    assert.deepEqual(openApiSecurity('admin_or_bot', 'GET'), [
      { admin: ['read', 'admin'] },
      { session: [] },
      { botId: [], botTimestamp: [], botNonce: [], botSignature: [] },
    ]);
    assert.equal(openApiSecurity('public', 'GET'), undefined);
  });
});
