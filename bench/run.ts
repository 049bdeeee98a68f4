import { benchRateLimit } from './ratelimit.js';
import { benchEnrichment } from './enrichment.js';
import { benchBaselines } from './baselines.js';
import { benchDetector } from './detector.js';
import { benchFanout } from './fanout.js';
import { benchMemory } from './memory.js';
import { benchMqttSync } from './mqtt-sync.js';
import { benchIdle } from './idle.js';
import { benchIngest } from './ingest.js';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CHECK, QUICK, RATIOS_FILE_ENV, machine } from './lib.js';
import { DEFAULT_FLOORS, checkFloors, readFloors } from './floors.js';

/** Runs every benchmark (or those named on the command line), each in its own process, and prints their figures. */
const BENCHMARKS: Record<string, () => Promise<boolean>> = {
  ratelimit: benchRateLimit,
  enrichment: benchEnrichment,
  fanout: benchFanout,
  ingest: benchIngest,
  baselines: benchBaselines,
  detector: benchDetector,
  memory: benchMemory,
  'mqtt-sync': benchMqttSync,
  idle: benchIdle,
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

if (names.length === 1 && (!CHECK || process.env[CHILD])) {
  // One benchmark: run it here, in a process of its own.
  const [name] = names as [string];
  if (!process.env[CHILD]) banner();
  const met = await BENCHMARKS[name]!();
  process.exit(process.env[CHILD] && !met ? NOT_MET : 0);
}

// Several (or the guard's run): each in a fresh process, so none inherits another's heap, JIT state
// or open sockets (README.md, "How they measure").
banner();
// The guard runs the benchmarks its floors name (BENCH_FLOORS: another floors file) and records
// every ratio they print in a file of its own.
const floors = CHECK ? readFloors(process.env.BENCH_FLOORS ?? DEFAULT_FLOORS) : null;
const guarded = floors && names.length ? Object.fromEntries(Object.entries(floors).filter(([name]) => names.includes(name))) : floors;
const ratiosDir = mkdtempSync(path.join(tmpdir(), 'mothership-bench-ratios-'));
const ratiosFile = path.join(ratiosDir, 'ratios.jsonl');
writeFileSync(ratiosFile, '');
const results: string[] = [];
let broken = false;
try {
  for (const name of names.length ? names : Object.keys(guarded ?? BENCHMARKS)) {
    const flags = process.argv.slice(2).filter((arg) => arg.startsWith('--'));
    const child = spawnSync(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), name, ...flags], {
      stdio: 'inherit',
      env: { ...process.env, [CHILD]: '1', [RATIOS_FILE_ENV]: ratiosFile },
    });
    if (child.status !== 0 && child.status !== NOT_MET) {
      console.error(`benchmark "${name}" failed (exit ${child.status ?? child.signal})`);
      broken = true;
      break;
    }
    results.push(`${name} ${child.status === 0 ? 'met' : 'NOT met'}`);
  }
  if (!broken) console.log(`\nTargets: ${results.join(', ')}`);
  if (guarded && !broken) {
    const measured = readFileSync(ratiosFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { label: string; value: number });
    const { lines, held } = checkFloors(guarded, measured);
    console.log(
      `\n## Guard: ratios against bench/floors.json\n\n${lines.join('\n')}\n\n${held ? 'Every ratio held its floor.' : 'A ratio fell below its floor.'}`,
    );
    process.exitCode = held ? 0 : 1;
  }
  if (broken) process.exitCode = 1;
} finally {
  rmSync(ratiosDir, { recursive: true, force: true });
}
