import { describe, it, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import madge from 'madge';
import { EVENT_TYPES } from '../src/events/index.js';

/**
 * The shape of src/ (docs/architecture.md): no import cycle between files or between folders, and
 * the composition root reaches each capability folder only through its entry point. Read from the
 * TypeScript sources, type-only imports included: a type import still ties two modules together.
 */
const root = fileURLToPath(new URL('../../', import.meta.url));

/** The folder of a file under src/ (`db/kv.ts` -> `db`), or null for a file at the top. */
const folderOf = (file: string): string | null => (file.includes('/') ? file.split('/')[0]! : null);

/** The cycles among folders: the strongly connected components (Tarjan) with more than one folder. */
function folderCycles(graph: Record<string, string[]>): string[][] {
  const edges = new Map<string, Set<string>>();
  for (const [file, imports] of Object.entries(graph)) {
    const from = folderOf(file);
    if (!from) continue;
    for (const imported of imports) {
      const to = folderOf(imported);
      if (to && to !== from) edges.set(from, (edges.get(from) ?? new Set()).add(to));
    }
  }
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (node: string) => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    for (const next of edges.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (stack.includes(next)) low.set(node, Math.min(low.get(node)!, index.get(next)!));
    }
    if (low.get(node) === index.get(node)) {
      const component: string[] = [];
      for (let member = stack.pop(); member !== undefined; member = member === node ? undefined : stack.pop()) component.push(member);
      if (component.length > 1) cycles.push(component.sort());
    }
  };
  for (const node of edges.keys()) if (!index.has(node)) visit(node);
  return cycles;
}

/** The imports that reach into another folder past its entry point: `from -> to`. */
function pastEntryPoints(graph: Record<string, string[]>): string[] {
  return Object.entries(graph).flatMap(([file, imports]) =>
    imports
      .filter((imported) => folderOf(imported) !== null && folderOf(imported) !== folderOf(file) && !imported.endsWith('/index.ts'))
      .map((imported) => `${file} -> ${imported}`),
  );
}

describe('architecture of src/', () => {
  let graph: Record<string, string[]>;
  let circular: string[][];
  before(async () => {
    const result = await madge(`${root}src`, { fileExtensions: ['ts'], tsConfig: `${root}tsconfig.json` });
    graph = result.obj();
    circular = result.circular();
  });

  it('reads the whole source tree', () => {
    assert.ok(Object.keys(graph).length >= 80, `only ${Object.keys(graph).length} files read`);
    assert.ok(graph['app.ts']!.includes('db/index.ts'), 'imports resolved from .js specifiers to .ts files');
  });

  it('no file imports itself through other files', () => {
    assert.deepEqual(circular, []);
  });

  it('no folder imports itself through other folders', () => {
    assert.deepEqual(folderCycles(graph), []);
  });

  it('app.ts imports each capability folder only through its entry point (index.ts)', () => {
    const inside = graph['app.ts']!.filter((file) => folderOf(file) !== null);
    assert.ok(inside.length >= 10, 'app.ts wires the capabilities');
    assert.deepEqual(
      inside.filter((file) => !file.endsWith('/index.ts')),
      [],
    );
  });

  it('a file outside a folder imports it only through its entry point (index.ts)', () => {
    assert.deepEqual(pastEntryPoints(graph), []);
    assert.ok(
      Object.keys(graph).some((file) => folderOf(file) !== 'http' && graph[file]!.includes('http/index.ts')),
      'the rooms reach the HTTP shell',
    );
  });

  it('the entry-point check finds an import past an index.ts, from a folder and from the top', () => {
    const graph = { 'a/x.ts': ['b/y.ts', 'b/index.ts', 'a/z.ts'], 'top.ts': ['a/z.ts', 'a/index.ts'], 'b/y.ts': [] };
    assert.deepEqual(pastEntryPoints(graph), ['a/x.ts -> b/y.ts', 'top.ts -> a/z.ts']);
  });

  it('writes go through Database.write, Database.transaction or EventLog.write, never `database.db`', () => {
    const writeThroughDb = /\.db\s*\.\s*(insertInto|updateTable|deleteFrom|replaceInto|mergeInto)\b/;
    const offenders = Object.keys(graph).filter((file) => folderOf(file) !== 'db' && writeThroughDb.test(readFileSync(`${root}src/${file}`, 'utf8')));
    assert.deepEqual(offenders, []);
  });

  it('the folder-cycle check finds a cycle through three folders', () => {
    const graph = { 'a/x.ts': ['b/index.ts'], 'b/index.ts': ['c/y.ts'], 'c/y.ts': ['a/x.ts'], 'd/z.ts': ['a/x.ts'] };
    assert.deepEqual(folderCycles(graph), [['a', 'b', 'c']]);
  });
});

describe("the dashboard's household model", () => {
  it('names every event type, those it ignores too: a new type must be decided on, not dropped by a default', () => {
    const source = readFileSync(`${root}src/dashboard/public/household.js`, 'utf8');
    const body = /export function applyToHousehold[\s\S]*?\n}\n/.exec(source)![0];
    const named = new Set([...body.matchAll(/case '([a-z_.]+)':/g)].map((match) => match[1]));
    assert.deepEqual(
      EVENT_TYPES.filter((type) => !named.has(type)),
      [],
    );
    assert.doesNotMatch(body, /default:/);
  });
});
