import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Validator as OpenApiValidator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROBLEMS } from '../src/http/problem.js';
import { ADMIN_TOKEN, startTestApp, type TestApp } from './helpers/app.js';
import { botRequest } from './helpers/bot.js';

/**
 * The OpenAPI document against the service: validated by an independent parser, then every
 * operation is called (its success and the errors anyone can provoke) and the real status, media
 * type and body are checked against what the document declares. A route added without a case here,
 * or a response the document does not declare, fails.
 */
type Json = Record<string, any>;
interface Case {
  method: string;
  path: string;
  url?: string;
  body?: unknown;
  headers?: Record<string, string>;
  bot?: boolean;
  status: number;
}

const validCase = (method: string, path: string, status: number, extra: Partial<Case> = {}): Case => ({ method, path, status, ...extra });

describe('OpenAPI document conformance', () => {
  let app: TestApp;
  let raw: Json;
  let doc: Json;
  let bot: { id: string; shared_secret: string };
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  const exercised = new Set<string>();

  before(async () => {
    app = await startTestApp('sqlite');
    raw = (await app.api('GET', '/openapi.json')).body;
    doc = (await SwaggerParser.dereference(structuredClone(raw) as never)) as Json;
    await app.api('POST', '/api/persons', { id: 'ada', name: 'Ada' });
    await app.api('POST', '/api/zones', { id: 'kitchen', name: 'Kitchen' });
    bot = (await app.api('POST', '/api/bots', { name: 'Conformance Bot' })).body;
    await app.api('POST', '/api/matches', {
      id: 'm1',
      status: 'completed',
      replay: {
        players: [
          { id: 'p1', name: 'A' },
          { id: 'p2', name: 'B' },
        ],
        events: [],
      },
    });
    const run = { commit_sha: 'a1b2c3d', timestamp: '2026-11-21T22:00:00.000Z', subject_geomean: 0.5, grep_1000_mean_ms: 40 };
    await app.api('POST', '/api/baselines', run);
    await app.api('POST', '/api/baselines', { ...run, commit_sha: 'b2c3d4e' });
    await app.api('POST', '/api/events', { type: 'zone.entry', person: 'ada', zone: 'kitchen' });
    // A delivery to redeliver (to a closed port: the answer does not matter here).
    await app.api('POST', '/api/settings/integration', { webhook: { enabled: true, url: 'http://127.0.0.1:9/hook' } });
    await app.api('POST', '/api/events', { type: 'anomaly.detected' });
    await app.api('POST', '/api/settings/integration', { webhook: { enabled: false } });
  });
  after(() => app.cleanup());

  it('is a valid OpenAPI 3.1 document for two independent validators', async () => {
    assert.equal(raw.openapi, '3.1.0');
    await SwaggerParser.validate(structuredClone(raw) as never);
    const result = await new OpenApiValidator().validate(structuredClone(raw));
    assert.equal(result.valid, true, JSON.stringify(result.errors, null, 2)?.slice(0, 2000));
  });

  const failures: string[] = [];
  /** Checks every case, collecting each mismatch (one run lists them all). */
  async function checkAll(cases: Case[]): Promise<void> {
    failures.length = 0;
    for (const testCase of cases) await check(testCase).catch((error: Error) => failures.push(error.message.split('\n')[0]!));
    assert.deepEqual(failures, []);
  }

  /** Sends a case and checks the answer against the document. */
  async function check(testCase: Case): Promise<void> {
    const url = testCase.url ?? testCase.path;
    const response = testCase.bot
      ? await botRequest(app.http, bot, testCase.method, url, testCase.body).then((answer) => ({
          statusCode: answer.status,
          headers: answer.headers,
          body: answer.body === undefined ? '' : JSON.stringify(answer.body),
        }))
      : await app.http.inject({
          method: testCase.method as 'GET',
          url,
          headers: {
            authorization: `Bearer ${ADMIN_TOKEN}`,
            ...(testCase.body !== undefined ? { 'content-type': 'application/json' } : {}),
            ...testCase.headers,
          },
          ...(testCase.body !== undefined ? { payload: JSON.stringify(testCase.body) } : {}),
        });
    const what = `${testCase.method} ${url} -> ${response.statusCode}`;
    assert.equal(response.statusCode, testCase.status, `${what}: ${String(response.body).slice(0, 300)}`);
    const operation = doc.paths[testCase.path]?.[testCase.method.toLowerCase()];
    assert.ok(operation, `${testCase.method} ${testCase.path} is in the document`);
    exercised.add(`${testCase.method} ${testCase.path}`);
    const declared = operation.responses[String(response.statusCode)];
    assert.ok(declared, `${what}: status declared (declared: ${Object.keys(operation.responses).join(', ')})`);
    if (response.statusCode === 204 || testCase.method === 'HEAD') {
      assert.equal(response.body, '', `${what}: no body`);
      assert.equal(declared.content, undefined, `${what}: declared without a body`);
      return;
    }
    const mediaType = String(response.headers['content-type']).split(';')[0]!;
    const media = declared.content?.[mediaType];
    assert.ok(media, `${what}: ${mediaType} declared (declared: ${Object.keys(declared.content ?? {}).join(', ')})`);
    if (!media.schema) return;
    const body = /json$/.test(mediaType) ? JSON.parse(response.body as string) : response.body;
    const validate = ajv.compile(media.schema);
    assert.ok(validate(body), `${what}: body matches the declared schema: ${ajv.errorsText(validate.errors)}\n${String(response.body).slice(0, 300)}`);
    for (const header of Object.keys(declared.headers ?? {})) {
      if (response.statusCode === 429 || header === 'Retry-After')
        assert.ok(response.headers[header.toLowerCase()] !== undefined, `${what}: declared header ${header} sent`);
    }
  }

  it('answers every operation as documented: success paths', async () => {
    // A session to list and end.
    await app.api('POST', '/api/session', { token: ADMIN_TOKEN }, { authorization: '' });
    const sessionId = (await app.api('GET', '/api/sessions')).body[0].id as string;
    const cases: Case[] = [
      validCase('GET', '/healthz', 200),
      validCase('GET', '/readyz', 200),
      validCase('GET', '/metrics', 200),
      validCase('GET', '/problems/{code}', 200, { url: '/problems/rate_limited' }),
      validCase('GET', '/schemas/baseline.schema.json', 200),
      validCase('POST', '/api/session', 204, { body: { token: ADMIN_TOKEN }, headers: { authorization: '' } }),
      validCase('DELETE', '/api/session', 204, { headers: { authorization: '' } }),
      validCase('GET', '/api/persons', 200),
      validCase('POST', '/api/persons', 201, { body: { name: 'Bob' } }),
      validCase('GET', '/api/persons/{id}', 200, { url: '/api/persons/ada' }),
      validCase('PATCH', '/api/persons/{id}', 200, { url: '/api/persons/bob', body: { name: 'Bobby' } }),
      validCase('DELETE', '/api/persons/{id}', 204, { url: '/api/persons/bob' }),
      validCase('GET', '/api/zones', 200),
      validCase('POST', '/api/zones', 201, { body: { name: 'Hall' } }),
      validCase('GET', '/api/zones/{id}', 200, { url: '/api/zones/kitchen' }),
      validCase('PATCH', '/api/zones/{id}', 200, { url: '/api/zones/hall', body: { name: 'Hallway' } }),
      validCase('DELETE', '/api/zones/{id}', 204, { url: '/api/zones/hall' }),
      validCase('POST', '/api/nodes/{id}/heartbeat', 204, { url: '/api/nodes/node-1/heartbeat', body: { quality: 80 } }),
      validCase('GET', '/api/nodes', 200),
      validCase('GET', '/api/nodes', 200, { url: '/api/nodes?limit=1&cursor=a' }),
      validCase('GET', '/api/nodes/{id}', 200, { url: '/api/nodes/node-1' }),
      validCase('PATCH', '/api/nodes/{id}', 200, { url: '/api/nodes/node-1', body: { name: 'Node one', zone: 'kitchen' } }),
      validCase('DELETE', '/api/nodes/{id}', 204, { url: '/api/nodes/node-1' }),
      validCase('GET', '/api/system/health', 200),
      validCase('GET', '/api/system/fall', 200),
      validCase('GET', '/api/system/mode', 200),
      validCase('PUT', '/api/system/mode', 200, { body: { mode: 'away' } }),
      validCase('POST', '/api/events', 202, { body: { type: 'anomaly.detected', detail: { note: 'conformance' } } }),
      validCase('GET', '/api/events', 200, { url: '/api/events?limit=5' }),

      validCase('POST', '/api/baselines', 201, {
        body: { commit_sha: 'c3d4e5f', timestamp: '2026-11-22T22:00:00.000Z', subject_geomean: 0.5, grep_1000_mean_ms: 40 },
      }),
      validCase('GET', '/api/baselines', 200, { url: '/api/baselines?detection=true&limit=2' }),
      validCase('GET', '/api/baselines/latest', 200),
      validCase('GET', '/api/baselines/compare', 200, { url: '/api/baselines/compare?head=latest&base=a1b2c3d' }),
      validCase('GET', '/api/baselines/{id}', 200, { url: '/api/baselines/1' }),
      validCase('GET', '/api/baselines/{id}/detection', 200, { url: '/api/baselines/2/detection' }),
      validCase('GET', '/api/settings/integration', 200),
      validCase('POST', '/api/settings/integration', 200, { body: { webhook: { enabled: false } } }),
      validCase('POST', '/api/settings/integration/test', 200, { body: { target: 'webhook', webhook: { url: 'http://127.0.0.1:9/hook' } } }),
      validCase('POST', '/api/settings/integration/discovery', 409),
      validCase('POST', '/api/settings/integration/mqtt-cleanup', 409, { body: { installation: 'ms-old' } }),
      validCase('POST', '/api/settings/integration/webhook-secret', 200),
      validCase('GET', '/api/webhook/deliveries', 200),
      validCase('POST', '/api/webhook/deliveries/{id}/redeliver', 202, { url: '/api/webhook/deliveries/1/redeliver' }),
      validCase('POST', '/api/webhook/deliveries/redeliver-failed', 202),
      validCase('GET', '/api/bots', 200),
      validCase('POST', '/api/bots', 201, { body: { name: 'Second Bot' } }),
      validCase('POST', '/api/bots/{id}/rotate-secret', 200, { url: '/api/bots/second-bot/rotate-secret' }),
      validCase('DELETE', '/api/bots/{id}', 204, { url: '/api/bots/second-bot' }),
      validCase('POST', '/api/matches', 201, { body: { id: 'm2', status: 'scheduled' } }),
      validCase('GET', '/api/matches', 200),
      validCase('GET', '/api/matches/{id}', 200, { url: '/api/matches/m1' }),
      validCase('PATCH', '/api/matches/{id}', 200, { url: '/api/matches/m2', body: { status: 'in_progress' } }),
      validCase('POST', '/api/request-enrichment', 202, { bot: true, body: { match_id: 'm1' } }),
      validCase('GET', '/api/matches/{id}/enrichment', 200, { url: '/api/matches/m1/enrichment' }),
      validCase('POST', '/api/tokens', 201, { body: { name: 'Grafana', scope: 'read' } }),
      validCase('GET', '/api/tokens', 200),
      validCase('DELETE', '/api/tokens/{id}', 204, { url: '/api/tokens/grafana' }),
      validCase('POST', '/api/users', 201, { body: { username: 'kim', name: 'Kim', role: 'household', password: 'correct horse' } }),
      validCase('GET', '/api/users', 200),
      validCase('GET', '/api/users/{username}', 200, { url: '/api/users/kim' }),
      validCase('PATCH', '/api/users/{username}', 200, { url: '/api/users/kim', body: { role: 'admin' } }),
      validCase('DELETE', '/api/users/{username}', 204, { url: '/api/users/kim' }),
      validCase('GET', '/api/session', 200),
      validCase('GET', '/api/sessions', 200),
      validCase('DELETE', '/api/sessions/{id}', 204, { url: `/api/sessions/${sessionId}` }),
      validCase('DELETE', '/api/sessions', 204),
    ];
    await checkAll(cases);
  });

  it('streams events as documented (text/event-stream)', async () => {
    const address = await app.http.listen({ port: 0, host: '127.0.0.1' });
    const controller = new AbortController();
    const response = await fetch(`${address}/api/events/stream`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` }, signal: controller.signal });
    const declared = doc.paths['/api/events/stream'].get.responses[String(response.status)];
    assert.ok(declared?.content?.[String(response.headers.get('content-type'))], `${response.status} ${response.headers.get('content-type')} declared`);
    controller.abort();
    exercised.add('GET /api/events/stream');
  });

  it('answers the errors anyone can provoke as documented: 401 without credentials, 404 for an unknown id, 400 for a bad body', async () => {
    const cases: Case[] = [];
    for (const [path, methods] of Object.entries(doc.paths as Json)) {
      for (const [method, operation] of Object.entries(methods as Json)) {
        // Row ids are integers, other ids are names.
        const unknownId = /baselines|deliveries/.test(path) ? '999999' : path.startsWith('/api/sessions/') ? 'A'.repeat(43) : 'no-such-id';
        const url = path.replace('{id}', unknownId).replace('{username}', 'no-such-user').replace('{code}', 'no_such_code');
        const bodyRoute = Boolean(operation.requestBody);
        const upper = method.toUpperCase();
        if (operation.security.length)
          cases.push({ method: upper, path, url, status: 401, headers: { authorization: '' }, ...(bodyRoute ? { body: {} } : {}) });
        // A heartbeat registers an unknown node.
        if (path.includes('{') && path !== '/api/nodes/{id}/heartbeat' && method !== 'head')
          cases.push({ method: upper, path, url, status: 404, ...(bodyRoute ? { body: validBodyFor(path, method) } : {}) });
        if (bodyRoute && operation.security?.some((requirement: Json) => 'admin' in requirement))
          cases.push({ method: upper, path, url: path.replace('{id}', 'ada'), status: 400, body: { unexpected_property: true } });
      }
    }
    await checkAll(cases);
  });

  it('answers the refusals of the HTTP shell as documented, on every operation it reaches (outside review: they were not declared)', async () => {
    const cases: Case[] = [];
    for (const [path, methods] of Object.entries(doc.paths as Json)) {
      for (const [method, operation] of Object.entries(methods as Json)) {
        if (operation.security.length && !operation.security.some((requirement: Json) => 'admin' in requirement)) continue; // bot-signed only
        const upper = method.toUpperCase();
        const url = path.replace('{id}', 'ada').replace('{username}', 'kim').replace('{code}', 'bad_request');
        // A query key no route takes.
        cases.push({ method: upper, path, url: `${url}?%00=1`, status: 400 });
        // A parameter beyond the router's bound.
        if (path.includes('{')) cases.push({ method: upper, path, url: path.replace(/\{[a-z]+\}/, 'a'.repeat(3000)), status: 414 });
        // A body in another media type, whether or not the route takes one.
        if (upper !== 'GET' && upper !== 'HEAD') cases.push({ method: upper, path, url, status: 415, body: 'text', headers: { 'content-type': 'text/plain' } });
      }
    }
    await checkAll(cases);
  });

  it("answers the errors a route's own rules raise as documented", async () => {
    await checkAll([
      validCase('POST', '/api/events', 404, { body: { type: 'zone.entry', person: 'nobody', zone: 'kitchen' } }),
      validCase('POST', '/api/events', 404, { body: { type: 'zone.entry', person: 'ada', zone: 'nowhere' } }),
      validCase('GET', '/api/baselines', 404, { url: '/api/baselines?before=999999' }),
      validCase('GET', '/api/baselines/compare', 404, { url: '/api/baselines/compare?head=latest&base=fffffff' }),
      validCase('POST', '/api/persons', 409, { body: { id: 'ada', name: 'Ada again' } }),
      validCase('POST', '/api/request-enrichment', 404, { bot: true, body: { match_id: 'no-such-match' } }),
    ]);
  });

  it('names, summarises and secures every operation for a generated client', () => {
    assert.deepEqual(raw.servers, [{ url: '/' }]);
    const operations: Json[] = Object.entries(doc.paths as Json).flatMap(([path, methods]) =>
      Object.entries(methods as Json).map(([method, operation]) => ({ name: `${method.toUpperCase()} ${path}`, ...(operation as Json) })),
    );
    const ids = operations.map((operation) => operation.operationId);
    assert.deepEqual(
      operations.filter((operation) => !/^[a-z]+(?:[A-Z][a-z0-9]*)+$/.test(operation.operationId ?? '')).map((operation) => operation.name),
      [],
      'operations without a camelCase verb+noun operationId',
    );
    assert.equal(new Set(ids).size, ids.length, 'operationIds are unique');
    assert.deepEqual(
      operations.filter((operation) => !operation.summary).map((operation) => operation.name),
      [],
      'operations without a summary',
    );
    assert.deepEqual(
      operations.filter((operation) => !Array.isArray(operation.security)).map((operation) => operation.name),
      [],
      'operations without a security list',
    );
    assert.ok(
      operations.some((operation) => operation.security.length === 0),
      'public routes say so with security: []',
    );
  });

  it("lists in docs/api.md every problem code of the registry and of the document's Problem.code enum, with its status", () => {
    const apiDoc = readFileSync(path.resolve(import.meta.dirname, '../../docs/api.md'), 'utf8');
    const listed = Object.fromEntries([...apiDoc.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \|/gm)].map(([, code, status]) => [code, Number(status)]));
    const registry = Object.fromEntries(Object.entries(PROBLEMS).map(([code, { status }]) => [code, status]));
    assert.deepEqual(listed, registry);
    assert.deepEqual(Object.keys(listed).sort(), [...raw.components.schemas.Problem.properties.code.enum].sort());
  });

  it('documents nothing that was not exercised, and exercises everything documented', () => {
    const documented = Object.entries(doc.paths as Json).flatMap(([path, methods]) =>
      Object.keys(methods as Json).map((method) => `${method.toUpperCase()} ${path}`),
    );
    assert.deepEqual(
      documented.filter((operation) => !exercised.has(operation)),
      [],
      'operations without a conformance case',
    );
  });
});

/** A body the route accepts, so a 404 comes from the unknown id, not from validation. */
function validBodyFor(path: string, method: string): unknown {
  if (path.startsWith('/api/persons') || path.startsWith('/api/zones') || path.startsWith('/api/nodes')) return { name: 'Renamed' };
  if (path.startsWith('/api/matches') && method === 'patch') return { status: 'in_progress' };
  return {};
}
