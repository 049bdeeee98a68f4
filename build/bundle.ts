/**
 * Bundles the compiled service (dist/src/main.js and every module it imports statically) into one
 * file, `dist/mothership.js`: the `mothership` command and `npm start`. Node's module loader spent
 * a third of start-up resolving, reading and linking about 700 small modules (bench/README.md);
 * one file skips that. dist/src stays as compiled, for the tests and for anyone importing a module.
 */
import { chmod, readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Plugin } from 'esbuild';

const DIST = fileURLToPath(new URL('..', import.meta.url));
const BUNDLE = path.join(DIST, 'mothership.js');
/** Our compiled modules, the only ones whose `import.meta.url` is rewritten. */
const OURS = path.join(DIST, 'src') + path.sep;

/**
 * Left in node_modules, each for a reason: a native addon; packages imported only when a setting
 * asks for them (PostgreSQL, Redis, MQTT, WebSocket brokers), which a start without them should not
 * even parse; packages that find their own files next to their code (pino's transport thread, Swagger
 * UI's static assets).
 */
const EXTERNAL = ['better-sqlite3', 'pg', 'pg-native', 'ioredis', 'mqtt', 'ws', 'pino', 'pino-pretty', '@fastify/swagger-ui'];

/**
 * A module's `import.meta.url` names the module's own file, and our modules find files relative to
 * it (package.json, the baseline schema, the dashboard, the checkpointer thread): in the bundle each
 * is rewritten to the URL that module had before bundling.
 */
const moduleUrls: Plugin = {
  name: 'module-urls',
  setup(bundle) {
    bundle.onLoad({ filter: /\.js$/ }, async ({ path: file }) => {
      if (!file.startsWith(OURS)) return undefined;
      const source = await readFile(file, 'utf8');
      if (!source.includes('import.meta.url')) return undefined;
      const fromBundle = path.relative(path.dirname(BUNDLE), file).split(path.sep).join('/');
      return {
        contents: source.replaceAll('import.meta.url', `new URL(${JSON.stringify(fromBundle)}, import.meta.url).href`),
        resolveDir: path.dirname(file),
        loader: 'js',
      };
    });
  },
};

await build({
  entryPoints: [path.join(DIST, 'src', 'main.js')],
  outfile: BUNDLE,
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'esm',
  external: EXTERNAL,
  // CommonJS packages in an ES module bundle still call require (for Node's own modules and the external ones).
  banner: { js: "import { createRequire as createRequireForBundle } from 'node:module';\nconst require = createRequireForBundle(import.meta.url);" },
  sourcemap: 'linked',
  plugins: [moduleUrls],
  logLevel: 'warning',
});
await chmod(BUNDLE, 0o755);
