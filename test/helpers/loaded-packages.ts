import { createRequire } from 'node:module';
import { Server } from 'node:net';

/**
 * Preloaded into a spawned service (NODE_OPTIONS=--import=...): once its HTTP server listens, writes
 * one line on standard error naming every package with a CommonJS module loaded (the require cache,
 * which also holds those an ES module imported). ES-module packages are not seen.
 */
export const LOADED_PACKAGES = 'loaded packages: ';

/** The package a module file belongs to (`@scope/name` or `name`), null for the service's own files. */
function packageOf(file: string): string | null {
  return /.*\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(file)?.[1] ?? null;
}

const cache = createRequire(import.meta.url).cache;
const listen = Server.prototype.listen;
Server.prototype.listen = function (this: Server, ...args: unknown[]) {
  this.once('listening', () => {
    const packages = new Set(Object.keys(cache).map(packageOf));
    packages.delete(null);
    process.stderr.write(`${LOADED_PACKAGES}${JSON.stringify([...packages].sort())}\n`);
  });
  return (listen as (...args: unknown[]) => Server).apply(this, args);
} as Server['listen'];
