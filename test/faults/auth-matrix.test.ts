import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ADMIN_TOKEN, startTestApp, type TestApp } from '../helpers/app.js';

/**
 * Every admin operation of the OpenAPI document, in every request-target form an attacker can
 * write, with every kind of wrong credential: 401 or 403, never the handler. Generated from
 * /openapi.json, so a route added later is covered without editing this file.
 */

const PUBLIC_API_OPERATIONS = new Set(['POST /api/session', 'DELETE /api/session']);

/** The same route written the ways a router may normalise: encoded letters, and absolute-form. */
export function requestTargets(path: string, authority: string): Record<string, string> {
  const rest = path.slice('/api'.length);
  return {
    plain: path,
    'encoded a': `/%61pi${rest}`,
    'encoded i': `/ap%69${rest}`,
    'encoded api': `/%61%70%69${rest}`,
    'absolute-form': `http://${authority}${path}`,
    'absolute-form, other host': `http://x${path}`,
    'absolute-form, encoded': `http://x/%61pi${rest}`,
  };
}

/** A raw request: node's client sends `target` exactly as written (absolute-form included). */
export function rawRequest(
  port: number,
  method: string,
  target: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: target,
        headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) } : {}) },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8'), headers: response.headers }));
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

interface Operation {
  method: string;
  path: string;
  secured: boolean;
}

function operationsOf(openapi: { paths: Record<string, Record<string, { security?: unknown[] }>> }): Operation[] {
  const operations: Operation[] = [];
  for (const [template, methods] of Object.entries(openapi.paths)) {
    const path = template.replace(/\{[^}]+\}/g, 'x1');
    for (const [method, operation] of Object.entries(methods)) {
      operations.push({ method: method.toUpperCase(), path, secured: Boolean(operation.security?.length) });
      // Fastify answers HEAD for every GET route: the same handler, so the same rule.
      if (method === 'get') operations.push({ method: 'HEAD', path, secured: Boolean(operation.security?.length) });
    }
  }
  return operations;
}

describe('no request without the admin credential reaches an admin handler', () => {
  let app: TestApp;
  let port: number;
  let operations: Operation[];
  before(async () => {
    app = await startTestApp('sqlite');
    await app.http.listen({ port: 0, host: '127.0.0.1' });
    port = (app.http.server.address() as AddressInfo).port;
    operations = operationsOf((await app.api('GET', '/openapi.json', undefined, { authorization: '' })).body);
  });
  after(() => app.cleanup());

  it('the only /api operations without a security requirement are the sign-in and sign-out', () => {
    const open = operations
      .filter((operation) => operation.path.startsWith('/api/') && !operation.secured)
      .map((operation) => `${operation.method} ${operation.path}`);
    assert.deepEqual(open.sort(), [...PUBLIC_API_OPERATIONS].sort());
    assert.ok(operations.filter((operation) => operation.secured).length >= 50, 'the document lists the admin operations');
  });

  let session = '';
  const credentials: Record<string, () => Record<string, string>> = {
    'no credentials': () => ({}),
    'a wrong bearer token': () => ({ authorization: 'Bearer not-the-token' }),
    'an empty bearer token': () => ({ authorization: 'Bearer ' }),
    'a basic credential': () => ({ authorization: 'Basic YWRtaW46YWRtaW4=' }),
    'a forged session cookie': () => ({ cookie: 'mothership_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' }),
    // A page on another port of the same host (Node-RED on :1880) sends the real cookie along.
    'a valid session cookie sent by another origin': () => ({ cookie: session, 'sec-fetch-site': 'same-site', origin: 'http://127.0.0.1:1880' }),
  };

  it('signs in for the cross-origin case', async () => {
    const response = await rawRequest(port, 'POST', '/api/session', {}, JSON.stringify({ token: ADMIN_TOKEN }));
    assert.equal(response.status, 204);
    session = String(response.headers['set-cookie']).split(';')[0]!;
  });

  for (const [what, headersOf] of Object.entries(credentials)) {
    it(`with ${what}, every secured operation in every request-target form answers 401 or 403`, async () => {
      const headers = headersOf();
      // A cookie may be refused as cross-origin (403) before it is looked up; bot-only routes ignore it (401).
      const allowed = headers.cookie ? [401, 403] : [401];
      let checked = 0;
      for (const operation of operations.filter((candidate) => candidate.secured)) {
        for (const [form, target] of Object.entries(requestTargets(operation.path, `127.0.0.1:${port}`))) {
          const body = ['POST', 'PUT', 'PATCH'].includes(operation.method) ? '{}' : undefined;
          const response = await rawRequest(port, operation.method, target, headers, body);
          const label = `${operation.method} ${target} (${form}, ${what})`;
          assert.ok(allowed.includes(response.status), `${label} answered ${response.status}: ${response.body.slice(0, 200)}`);
          if (operation.method !== 'HEAD') assert.equal(JSON.parse(response.body).code, response.status === 401 ? 'unauthorized' : 'forbidden', label);
          checked++;
        }
      }
      assert.ok(checked >= 350, `only ${checked} requests checked`);
    });
  }

  it('other spellings of an admin path never reach a handler either', async () => {
    for (const operation of operations.filter((candidate) => candidate.secured && candidate.method !== 'HEAD')) {
      const rest = operation.path.slice('/api'.length);
      for (const target of [
        `/API${rest}`,
        `//api${rest}`,
        `/api${rest}/`,
        `/api/.${rest}`,
        `/api/..${operation.path}`,
        `/%2561pi${rest}`,
        `/api${rest.replace(/\//g, '%2F')}`,
        `/api${rest};x`,
      ]) {
        const response = await rawRequest(port, operation.method, target, {}, operation.method === 'GET' || operation.method === 'DELETE' ? undefined : '{}');
        assert.ok(response.status >= 400 && response.status < 500, `${operation.method} ${target} answered ${response.status}`);
        assert.ok(response.status !== 200 && response.status !== 201 && response.status !== 204, `${operation.method} ${target} reached a handler`);
      }
    }
  });
});
