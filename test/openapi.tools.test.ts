import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startTestApp } from './helpers/app.js';

/**
 * The OpenAPI document through tools nobody here wrote, as an integrator uses them: Redocly and
 * Spectral lint it, openapi-typescript generates a client from it, and a script calling every
 * operation through openapi-fetch compiles under `tsc --strict` with no cast and no non-null
 * assertion, reading every field the document says an answer always has.
 *
 * The tools are devDependencies; OPENAPI_TOOLS_DIR names another folder whose node_modules holds them.
 */
type Json = Record<string, any>;
const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const TOOLS = process.env.OPENAPI_TOOLS_DIR ?? ROOT;

function tool(name: string): string {
  const bin = path.join(TOOLS, 'node_modules', '.bin', name);
  assert.ok(existsSync(bin), `${bin} is missing: install the devDependencies (or set OPENAPI_TOOLS_DIR to a folder with them installed)`);
  return bin;
}

async function exec(bin: string, args: string[], cwd: string): Promise<{ code: number; output: string }> {
  const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
  try {
    const { stdout, stderr } = await run(bin, args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof failed.code === 'number' ? failed.code : 1, output: `${failed.stdout ?? ''}${failed.stderr ?? ''}` };
  }
}

describe('OpenAPI document through independent tools', () => {
  let dir: string;
  let doc: Json;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mothership-openapi-'));
    const app = await startTestApp('sqlite');
    try {
      doc = (await app.api('GET', '/openapi.json')).body;
    } finally {
      await app.cleanup();
    }
    writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(doc, null, 2));
    writeFileSync(path.join(dir, '.spectral.yaml'), 'extends: ["spectral:oas"]\n');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('Redocly lint: 0 errors', async () => {
    const { code, output } = await exec(tool('redocly'), ['lint', 'openapi.json', '--format', 'stylish'], dir);
    assert.equal(code, 0, output.slice(-4000));
  });

  it('Spectral (spectral:oas): 0 errors', async () => {
    const { code, output } = await exec(tool('spectral'), ['lint', 'openapi.json', '--ruleset', '.spectral.yaml', '--fail-severity', 'error'], dir);
    assert.equal(
      code,
      0,
      output
        .split('\n')
        .filter((line) => / error /.test(line))
        .join('\n') || output.slice(-4000),
    );
  });

  it('lists the fields every success answer always has (`required` on each object schema)', () => {
    const missing: string[] = [];
    const visit = (schema: Json | undefined, where: string): void => {
      if (!schema || typeof schema !== 'object') return;
      if (schema.properties && !schema.required) missing.push(where);
      for (const [name, property] of Object.entries((schema.properties ?? {}) as Json)) visit(property, `${where}.${name}`);
      visit(schema.items, `${where}[]`);
    };
    for (const [route, methods] of Object.entries(doc.paths as Json))
      for (const [method, operation] of Object.entries(methods as Json))
        for (const [status, response] of Object.entries(operation.responses as Json))
          if (status.startsWith('2')) visit(resolve(doc, response.content?.['application/json']?.schema), `${method.toUpperCase()} ${route} ${status}`);
    assert.deepEqual(missing, []);
  });

  it('generates a typed client whose calls to every operation compile under tsc --strict without a cast', async () => {
    const generated = await exec(tool('openapi-typescript'), ['openapi.json', '--output', 'schema.ts'], dir);
    assert.equal(generated.code, 0, generated.output);
    const script = clientScript(doc);
    assert.doesNotMatch(script, /\sas\s|!\.|!\)|!;/, 'the script uses no cast and no non-null assertion');
    writeFileSync(path.join(dir, 'calls.ts'), script);
    const fetchTypes = path.join(TOOLS, 'node_modules', 'openapi-fetch');
    assert.ok(existsSync(fetchTypes), `${fetchTypes} is missing: install the devDependencies`);
    writeFileSync(
      path.join(dir, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'ES2022',
          module: 'ESNext',
          moduleResolution: 'Bundler',
          lib: ['ES2023', 'DOM'],
          types: [],
          paths: { 'openapi-fetch': [fetchTypes] },
        },
        files: ['calls.ts'],
      }),
    );
    const compiled = await exec(path.join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', 'tsconfig.json'], dir);
    assert.equal(compiled.code, 0, compiled.output.slice(0, 6000));
  });
});

/** A literal the schema accepts: every field it names (an open object gets one of its own), the first of every choice. */
function sample(schema: Json | undefined): unknown {
  if (!schema) return {};
  if (schema.const !== undefined) return schema.const;
  if (schema.enum) return schema.enum[0];
  if (schema.default !== undefined) return schema.default;
  const choice = schema.oneOf ?? schema.anyOf;
  if (choice) return sample({ ...schema, oneOf: undefined, anyOf: undefined, ...choice[0], properties: { ...schema.properties, ...choice[0].properties } });
  const type = [schema.type ?? 'object'].flat().find((candidate: string) => candidate !== 'null');
  if (type === 'string') return 'x'.repeat(Math.max(1, schema.minLength ?? 1));
  if (type === 'integer' || type === 'number') return Math.max(1, schema.minimum ?? 1);
  if (type === 'boolean') return true;
  if (type === 'array') return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items));
  if (!schema.properties) return schema.additionalProperties === false ? {} : { field: 'x' };
  return Object.fromEntries(Object.entries(schema.properties as Json).map(([name, property]) => [name, sample(property)]));
}

const resolve = (doc: Json, schema: Json | undefined): Json | undefined =>
  schema?.$ref ? doc.components.schemas[String(schema.$ref).replace('#/components/schemas/', '')] : schema;

/** Statements reading every field the success schema requires, into a value typed "not undefined". */
function readRequired(schema: Json | undefined, value: string): string[] {
  if (!schema) return [];
  if ([schema.type].flat().includes('array') && schema.items) return [`for (const item of ${value}) {`, ...readRequired(schema.items, 'item'), '}'];
  return (schema.required ?? []).map((field: string) => `present.push(${value}[${JSON.stringify(field)}]);`);
}

/** One openapi-fetch call per operation, with the parameters and body each requires. */
function clientScript(doc: Json): string {
  const calls: string[] = [];
  for (const [route, methods] of Object.entries(doc.paths as Json)) {
    for (const [method, operation] of Object.entries(methods as Json)) {
      const params: Record<string, Record<string, unknown>> = {};
      for (const parameter of operation.parameters ?? []) {
        if (parameter.in !== 'path' && parameter.in !== 'query') continue;
        if (parameter.in === 'query' && !parameter.required) continue;
        (params[parameter.in] ??= {})[parameter.name] = sample(parameter.schema);
      }
      const bodySchema = operation.requestBody?.content?.['application/json']?.schema;
      const init = {
        ...(Object.keys(params).length ? { params } : {}),
        ...(bodySchema ? { body: sample(resolve(doc, bodySchema)) } : {}),
      };
      const success = Object.entries(operation.responses as Json).find(([status]) => status.startsWith('2'));
      const successSchema = resolve(doc, success?.[1].content?.['application/json']?.schema);
      const reads = readRequired(successSchema, 'data');
      // An answer in several media types (JSON, or a page for a browser) is a union a client narrows first.
      const guard = Object.keys(success?.[1].content ?? {}).length > 1 ? "data && typeof data === 'object'" : 'data';
      calls.push(
        `  // ${operation.operationId}`,
        '  {',
        `    const { data, error } = await client.${method.toUpperCase()}(${JSON.stringify(route)}${Object.keys(init).length ? `, ${JSON.stringify(init)}` : ''});`,
        '    results.push(error);',
        ...(reads.length ? [`    if (${guard}) {`, ...reads.map((line) => `      ${line}`), '    }'] : ['    results.push(data);']),
        '  }',
      );
    }
  }
  return [
    "import createClient from 'openapi-fetch';",
    "import type { paths } from './schema';",
    '',
    "const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:8080' });",
    '',
    '/** Every operation once; every field an answer always has is typed `{} | null`, never undefined. */',
    'export async function callEveryOperation(): Promise<unknown[]> {',
    '  const results: unknown[] = [];',
    '  const present: Array<{} | null> = [];',
    ...calls,
    '  return [...results, ...present];',
    '}',
    '',
  ].join('\n');
}
