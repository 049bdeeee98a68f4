import { benchRateLimit } from './ratelimit.js';
import { benchEnrichment } from './enrichment.js';
import { benchBaselines } from './baselines.js';
import { benchDetector } from './detector.js';
import { benchFanout } from './fanout.js';
import { benchMemory } from './memory.js';
import { benchMqttSync } from './mqtt-sync.js';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { QUICK, machine } from './lib.js';

/** Runs every benchmark (or those named on the command line), each in its own process, and prints their figures. */
const BENCHMARKS: Record<string, () => Promise<boolean>> = {
  ratelimit: benchRateLimit,
  enrichment: benchEnrichment,
  fanout: benchFanout,
  baselines: benchBaselines,
  detector: benchDetector,
  memory: benchMemory,
  'mqtt-sync': benchMqttSync,
};

const names = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
const unknown = names.filter((name) => !BENCHMARKS[name]);
if (unknown.length) {
  console.error(`unknown benchmark "${unknown[0]}"; known: ${Object.keys(BENCHMARKS).join(', ')}`);
  process.exit(2);
}

const CHILD = 'MOTHERSHIP_BENCH_CHILD';
/** How a benchmark's own process tells the parent its targets were missed (0: met; else: failed). */
const NOT_MET = 10;
const banner = () => console.log(`# Mothership benchmarks${QUICK ? ' (quick: sizes too small for real figures)' : ''}\n\n${machine()}`);

if (names.length === 1) {
  // One benchmark: run it here, in a process of its own.
  const [name] = names as [string];
  if (!process.env[CHILD]) banner();
  const met = await BENCHMARKS[name]!();
  process.exit(process.env[CHILD] && !met ? NOT_MET : 0);
}

// Several: each in a fresh process, so none inherits another's heap, JIT state or open sockets
// (README.md, "How they measure").
banner();
const results: string[] = [];
for (const name of names.length ? names : Object.keys(BENCHMARKS)) {
  const flags = process.argv.slice(2).filter((arg) => arg.startsWith('--'));
  const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), name, ...flags], {
    stdio: 'inherit',
    env: { ...process.env, [CHILD]: '1' },
  });
  if (child.status !== 0 && child.status !== NOT_MET) {
    console.error(`benchmark "${name}" failed (exit ${child.status ?? child.signal})`);
    process.exit(1);
  }
  results.push(`${name} ${child.status === 0 ? 'met' : 'NOT met'}`);
}
console.log(`\nTargets: ${results.join(', ')}`);
process.exit(0);
