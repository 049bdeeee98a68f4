import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import SwaggerParser from '@apidevtools/swagger-parser';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { createHash, createHmac } from 'node:crypto';
import { MAX_CLOCK_SKEW_SECONDS, NONCE_TTL_SECONDS, parseSignatures, stringToSign, verifySignatures, type SignedParts } from '../src/enrichment/signing.js';
import { DAILY_QUOTA } from '../src/enrichment/quota.js';
import { SECRET_CACHE_MS } from '../src/enrichment/bots.js';
import { EVENT_LOOP_SAMPLE_MS } from '../src/ops/event-loop-delay.js';
import { IDLE_INTERVAL_MS, QUIET_INTERVAL_MS } from '../src/db/checkpointer.js';
import { GIVE_BACK_HELD_MS } from '../src/storage-budget.js';
import { SWEEP_MAX_INTERVAL_MS } from '../src/presence/transitions.js';
import { USAGE_SHARDS } from '../src/db/migrations.js';
import { STREAM_RECHECK_MS } from '../src/events/routes.js';
import { CLOCK_CHECK_MS, CLOCK_TOLERANCE_MS } from '../src/ops/clock.js';
import { PAGE_ITEMS } from '../src/http/index.js';
import { DETECTION_WEIGHT } from '../src/baselines/routes.js';
import { FUTURE_LEEWAY_MS } from '../src/baselines/schema.js';
import { MAX_THRESHOLD_PCT } from '../src/baselines/compare.js';
import { VERSION } from '../src/version.js';
import { startTestApp, type TestApp } from './helpers/app.js';

/**
 * The docs cannot drift from the service: every request body example in docs/api.md validates
 * against its operation's request schema in the live OpenAPI document, and every operation that
 * takes a body has one; the signing test vector of docs/enrichment.md is what the service computes.
 */
type Json = Record<string, any>;

const readDoc = (name: string) => readFileSync(path.resolve(import.meta.dirname, '../../docs', name), 'utf8');

/** `<!-- example: operationId -->` followed by a ```json block: [operationId, body text]. */
function requestExamples(markdown: string): { operationId: string; text: string }[] {
  return [...markdown.matchAll(/<!-- example: (\w+) -->\n```json\n([\s\S]*?)\n```/g)].map(([, operationId, text]) => ({
    operationId: operationId!,
    text: text!,
  }));
}

describe('docs/api.md request bodies', () => {
  let app: TestApp;
  const bodySchemas = new Map<string, Json>();

  before(async () => {
    app = await startTestApp('sqlite');
    const doc = (await SwaggerParser.dereference((await app.api('GET', '/openapi.json')).body)) as Json;
    for (const methods of Object.values(doc.paths as Json))
      for (const operation of Object.values(methods as Json))
        if (operation.requestBody) bodySchemas.set(operation.operationId, operation.requestBody.content['application/json'].schema);
  });
  after(() => app.cleanup());

  /** What is wrong with the examples of `markdown`: one line per problem, empty when none. */
  function problems(markdown: string): string[] {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats.default(ajv);
    const examples = requestExamples(markdown);
    const found: string[] = [];
    for (const { operationId, text } of examples) {
      const schema = bodySchemas.get(operationId);
      if (!schema) {
        found.push(`${operationId}: no operation with a request body has this operationId`);
        continue;
      }
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch (error) {
        found.push(`${operationId}: not JSON (${(error as Error).message})`);
        continue;
      }
      const validate = ajv.compile(schema);
      if (!validate(body)) found.push(`${operationId}: ${text.replace(/\s+/g, ' ')} does not validate: ${ajv.errorsText(validate.errors)}`);
    }
    const documented = new Set(examples.map((example) => example.operationId));
    for (const operationId of bodySchemas.keys()) if (!documented.has(operationId)) found.push(`${operationId}: takes a body but has no example`);
    return found;
  }

  it('has an example for every operation that takes a body, each valid against its schema', () => {
    assert.ok(bodySchemas.size >= 20, `the document lists the operations with a body (${bodySchemas.size})`);
    assert.deepEqual(problems(readDoc('api.md')), []);
  });

  it('fails for an example with a field the schema does not have, and for an operation without an example', () => {
    const markdown = readDoc('api.md');
    const misnamed = markdown.replace('{"type": "zone.entry", "person": "ada"', '{"event_type": "zone.entry", "person": "ada"');
    assert.notEqual(misnamed, markdown);
    assert.match(problems(misnamed).join('\n'), /^createEvent: \{"event_type": "zone.entry".* does not validate: .*must have required property 'type'/m);
    const missing = markdown.replace('<!-- example: setSystemMode -->', '');
    assert.deepEqual(problems(missing), ['setSystemMode: takes a body but has no example']);
  });

  it('has presence examples that work in the order they are written: a person, a zone, then its events (outside review)', async () => {
    const paths: Record<string, string> = { createPerson: '/api/persons', createZone: '/api/zones', createEvent: '/api/events' };
    for (const { operationId, text } of requestExamples(readDoc('api.md')).filter((example) => example.operationId in paths)) {
      const response = await app.api('POST', paths[operationId]!, JSON.parse(text));
      assert.ok(response.status === 201 || response.status === 202, `${operationId} ${text}: ${response.status} ${JSON.stringify(response.body)}`);
    }
  });
});

describe('docs/enrichment.md signing test vector', () => {
  const markdown = readDoc('enrichment.md');
  const block = (marker: string) => {
    const match = new RegExp(`<!-- ${marker} -->\n\`\`\`text\n([\\s\\S]*?)\n\`\`\``).exec(markdown);
    assert.ok(match, `docs/enrichment.md has the block <!-- ${marker} -->`);
    return match[1]!;
  };
  const vector = Object.fromEntries(
    block('signing-test-vector')
      .split('\n')
      .map((line) => /^([\w-]+):\s+(.*)$/.exec(line)!.slice(1)),
  );
  const documentedString = block('signing-test-vector: string-to-sign');
  const parts: SignedParts = {
    method: vector.method!,
    pathAndQuery: vector.path_and_query!,
    timestamp: vector.timestamp!,
    nonce: vector.nonce!,
    body: vector.body!,
  };

  it("is what the service's signer computes, and its verifier accepts the documented header", () => {
    assert.equal(stringToSign(parts), documentedString);
    assert.equal(verifySignatures([vector.secret!], parts, parseSignatures(vector['X-Bot-Signature']!)), true);
    // The vector pins every part: another body, or another secret, does not verify.
    assert.equal(verifySignatures([vector.secret!], { ...parts, body: `${vector.body}\n` }, parseSignatures(vector['X-Bot-Signature']!)), false);
    assert.equal(verifySignatures([`${vector.secret}x`], parts, parseSignatures(vector['X-Bot-Signature']!)), false);
  });

  it("is what node:crypto computes following the page's words, independently of the service", () => {
    const bodyHash = createHash('sha256').update(Buffer.from(vector.body!, 'utf8')).digest('hex');
    assert.equal(bodyHash, vector.body_sha256);
    const message = ['v1', vector.method, vector.path_and_query, vector.timestamp, vector.nonce, bodyHash].join('\n');
    assert.equal(message, documentedString);
    assert.equal(`v1=${createHmac('sha256', Buffer.from(vector.secret!, 'utf8')).update(message).digest('hex')}`, vector['X-Bot-Signature']);
  });
});

describe('numbers the code sets, in prose', () => {
  // Every sentence that gives such a number (the daily enrichment quota, ...), with the number the
  // code makes it. A sentence
  // rewritten so its pattern no longer matches fails too: update the pattern, so none goes unchecked.
  const statements: [file: string, pattern: RegExp, expected: number][] = [
    ['README.md', /(\d+) per bot in any 24 hours/g, DAILY_QUOTA],
    ['docs/enrichment.md', /by the other instances of an\s+installation within (\d+) s/g, SECRET_CACHE_MS / 1000],
    ['docs/security.md', /nonces remembered (\d+) min/g, NONCE_TTL_SECONDS / 60],
    ['docs/security.md', /deletes them only (\d+) minutes after they\s+expired/g, NONCE_TTL_SECONDS / 60],
    ['docs/operations.md', /while it is still fresh\s+\((\d+) minutes from its timestamp\)/g, MAX_CLOCK_SKEW_SECONDS / 60],
    ['docs/operations.md', /Keep the service stopped for\s+(\d+) minutes/g, NONCE_TTL_SECONDS / 60],
    ['docs/enrichment.md', /limited to (\d+) enqueued jobs per bot/g, DAILY_QUOTA],
    ['docs/enrichment.md', /at most (\d+) jobs enqueued by this bot/g, DAILY_QUOTA],
    ['docs/enrichment.md', /"daily";q=(\d+);w=86400/g, DAILY_QUOTA],
    ['docs/enrichment.md', /"daily";r=(\d+);t=0`/g, DAILY_QUOTA - 1],
    ['docs/dashboard.md', /\*\d+ of (\d+)\s+requests in 24 h\*/g, DAILY_QUOTA],
    ['docs/deployment.md', /may enqueue (\d+) requests\s+a day/g, DAILY_QUOTA],
    ['docs/operations.md', /is sampled\s+every (\d+) ms/g, EVENT_LOOP_SAMPLE_MS],
    ['docs/operations.md', /having paused, every (\d+) s/g, IDLE_INTERVAL_MS / 1000],
    ['docs/operations.md', /within\s+(\d+) s of the first one after a longer pause/g, IDLE_INTERVAL_MS / 1000],
    ['docs/operations.md', /tries again (\d+) s later/g, IDLE_INTERVAL_MS / 1000],
    ['docs/operations.md', /(\d+) s after the first that\s+found none/g, QUIET_INTERVAL_MS / 1000],
    ['docs/operations.md', /Once (\d+) s passes without a commit/g, QUIET_INTERVAL_MS / 1000],
    ['docs/operations.md', /A give-back still waiting after (\d+) s/g, GIVE_BACK_HELD_MS / 1000],
    ['docs/architecture.md', /its backend's pid modulo (\d+)/g, USAGE_SHARDS],
    ['docs/configuration.md', /`node.offline` follows within a tenth of it \(at most (\d+) s\)/g, SWEEP_MAX_INTERVAL_MS / 1000],
    ['docs/api.md', /An open stream's token or session is checked again every (\d+) s/g, STREAM_RECHECK_MS / 1000],
    ['docs/security.md', /an event stream open with it ends within (\d+) s/g, STREAM_RECHECK_MS / 1000],
    ['docs/architecture.md', /checks each one's credential again every (\d+) s/g, STREAM_RECHECK_MS / 1000],
    ['docs/security.md', /is checked again every (\d+) s and ends/g, STREAM_RECHECK_MS / 1000],
    ['docs/operations.md', /database server's at start and every (\d+) minutes/g, CLOCK_CHECK_MS / 60_000],
    ['docs/operations.md', /warns when they differ by more than (\d+) s/g, CLOCK_TOLERANCE_MS / 1000],
    ['docs/operations.md', /abs\(mothership_clock_offset_seconds\) > (\d+)/g, CLOCK_TOLERANCE_MS / 1000],
    ['docs/api.md', /costs its group's cost once per (\d+) items/g, PAGE_ITEMS],
    ['docs/api.md', /`detection=true` costs (\d+)\s+times that/g, DETECTION_WEIGHT],
    ['docs/api.md', /`limit=500`: (\d+) of a token's/g, (500 / PAGE_ITEMS) * DETECTION_WEIGHT],
    ['docs/api.md', /`GET \/api\/baselines\/\{id\}\/detection`\) (\d+) as well/g, DETECTION_WEIGHT],
    ['docs/baselines.md', /and one run's verdict (\d+) \(/g, DETECTION_WEIGHT],
    ['docs/baselines.md', /more than (\d+) minutes ahead of its own clock/g, FUTURE_LEEWAY_MS / 60_000],
    ['docs/baselines.md', /more than (\d+) minutes ahead of the machine's own clock/g, FUTURE_LEEWAY_MS / 60_000],
    ['docs/baselines.md', /a decimal number of percent from 0 to (\d+)/g, MAX_THRESHOLD_PCT],
    ['docs/enrichment.md', /take the new secret within (\d+) s/g, SECRET_CACHE_MS / 1000],
    ['docs/configuration.md', /pays its cost once per (\d+) items/g, PAGE_ITEMS],
    ['docs/configuration.md', /items its `limit` asks for, (\d+) times that/g, DETECTION_WEIGHT],
    ['docs/baselines.md', /Verdicts take about (\d+) times/g, DETECTION_WEIGHT],
    ['docs/baselines.md', /the rate limiter (\d+) times as much/g, DETECTION_WEIGHT],
    ['docs/baselines.md', /a page of 500\s+with verdicts costs (\d+) of/g, (500 / PAGE_ITEMS) * DETECTION_WEIGHT],
  ];

  it('states the number the code makes it, naming each place that does not', () => {
    const wrong: string[] = [];
    for (const [file, pattern, expected] of statements) {
      const text = readFileSync(path.resolve(import.meta.dirname, '../..', file), 'utf8');
      const found = [...text.matchAll(pattern)];
      if (found.length === 0) wrong.push(`${file}: no sentence matches ${pattern} any more (update test/docs.test.ts)`);
      for (const match of found) {
        const line = text.slice(0, match.index).split('\n').length;
        if (Number(match[1]) !== expected) wrong.push(`${file}:${line}: "${match[0].replace(/\s+/g, ' ')}" should say ${expected}`);
      }
    }
    assert.deepEqual(wrong, []);
  });

  it("shows this release's version in docs/mqtt.md's discovery payloads (outside review: they said 0.1.0)", () => {
    const versions = [...readFileSync(path.resolve(import.meta.dirname, '../../docs/mqtt.md'), 'utf8').matchAll(/"sw_version": "([^"]*)"/g)].map(
      (match) => match[1],
    );
    assert.ok(versions.length >= 2);
    assert.deepEqual(new Set(versions), new Set([VERSION]));
    // And the webhook's User-Agent (new user's walkthrough: it said 0.2.0).
    const agents = [...readFileSync(path.resolve(import.meta.dirname, '../../docs/webhook.md'), 'utf8').matchAll(/^User-Agent: mothership\/(\S+)$/gm)];
    assert.deepEqual(
      agents.map((match) => match[1]),
      [VERSION],
    );
  });
});

describe('the tables of docs/', () => {
  it('have as many cells in each row as in their header, and no paragraph between two rows (a | in a cell is escaped)', () => {
    const dir = path.resolve(import.meta.dirname, '../../docs');
    const cells = (row: string) => row.replace(/\\\|/g, '').split('|').length;
    const wrong: string[] = [];
    for (const file of readdirSync(dir).filter((name) => name.endsWith('.md'))) {
      const lines = readFileSync(path.join(dir, file), 'utf8').split('\n');
      let header: number | null = null;
      let fenced = false;
      lines.forEach((line, index) => {
        if (line.startsWith('```')) fenced = !fenced;
        if (fenced || !line.startsWith('|')) {
          header = null;
          return;
        }
        if (header === null) {
          if (!/^\|[\s:|-]+\|$/.test(lines[index + 1] ?? '')) wrong.push(`${file}:${index + 1}: a row outside a table`);
          header = cells(line);
        } else if (cells(line) !== header) wrong.push(`${file}:${index + 1}: ${cells(line) - 1} cells, its header ${header - 1}`);
      });
    }
    assert.deepEqual(wrong, []);
  });
});
