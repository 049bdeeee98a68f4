import { benchRateLimit } from './ratelimit.js';
import { benchEnrichment } from './enrichment.js';
import { benchBaselines } from './baselines.js';
import { benchFanout } from './fanout.js';
import { benchMemory } from './memory.js';
import { QUICK, machine } from './lib.js';

/** Runs every benchmark (or those named on the command line) and prints their figures. */
const BENCHMARKS: Record<string, () => Promise<boolean>> = {
  ratelimit: benchRateLimit,
  enrichment: benchEnrichment,
  fanout: benchFanout,
  baselines: benchBaselines,
  memory: benchMemory,
};

const names = process.argv.slice(2).filter((arg) => !arg.startsWith('--'));
const selected = names.length ? names : Object.keys(BENCHMARKS);
console.log(`# Mothership benchmarks${QUICK ? ' (quick: sizes too small for real figures)' : ''}\n\n${machine()}`);
const results: Record<string, boolean> = {};
for (const name of selected) {
  const bench = BENCHMARKS[name];
  if (!bench) {
    console.error(`unknown benchmark "${name}"; known: ${Object.keys(BENCHMARKS).join(', ')}`);
    process.exit(2);
  }
  results[name] = await bench();
}
console.log(`\nTargets: ${Object.entries(results).map(([name, met]) => `${name} ${met ? 'met' : 'NOT met'}`).join(', ')}`);
process.exit(0);
