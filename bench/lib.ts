import os from 'node:os';
import { appendFileSync } from 'node:fs';

/** `--quick` (or BENCH_QUICK=1): a small size, so CI can prove every benchmark still runs. */
export const QUICK = process.argv.includes('--quick') || process.env.BENCH_QUICK === '1';

/**
 * `--check`: the guard's run (README.md, "The guard"): only the ratios bench/floors.json names, at
 * a size that tells a 2x regression from a busy machine's noise.
 */
export const CHECK = process.argv.includes('--check');

/** Where `ratio` records each figure for the guard, one JSON line per ratio (set by run.ts). */
export const RATIOS_FILE_ENV = 'MOTHERSHIP_BENCH_RATIOS';

export interface Row {
  name: string;
  value: number;
  unit: string;
  note?: string;
}

/** Calls `step` repeatedly for `durationMs` (after a warm-up); returns operations per second. */
export async function opsPerSecond(step: () => Promise<unknown> | unknown, durationMs: number, batch = 1): Promise<number> {
  const warmUntil = performance.now() + Math.min(300, durationMs / 5);
  while (performance.now() < warmUntil) await step();
  let operations = 0;
  const started = performance.now();
  while (performance.now() - started < durationMs) {
    await step();
    operations += batch;
  }
  return operations / ((performance.now() - started) / 1000);
}

/** The middle value (the mean of the two middle ones for an even count). */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/**
 * The guard's way (`--check`): the two contenders alternate step by step (each step `batch`
 * operations, the one going first swapping every pair) for `durationMs`, and each side's rate is that of its
 * median step. A busy machine preempts a step now and then, on either side; the median steps are
 * the ones it left alone, so the ratio holds where best-of rounds swung by a factor of 2
 * (README.md, "The guard").
 */
async function pairedRates(ours: () => Promise<unknown> | unknown, reference: () => Promise<unknown> | unknown, durationMs: number, batch: number) {
  const warmUntil = performance.now() + Math.min(300, durationMs / 5);
  while (performance.now() < warmUntil) {
    await ours();
    await reference();
  }
  const times: [number[], number[]] = [[], []];
  const steps = [ours, reference];
  const started = performance.now();
  for (let pair = 0; performance.now() - started < durationMs; pair++)
    for (const side of pair % 2 ? [1, 0] : [0, 1]) {
      const stepStarted = performance.now();
      await steps[side]!();
      times[side]!.push(performance.now() - stepStarted);
    }
  return times.map((sideTimes) => (batch * 1000) / median(sideTimes)) as [number, number];
}

/**
 * Measures two contenders in alternation over `rounds` rounds and keeps each one's best rate, so
 * machine noise and JIT warm-up order favour neither. The guard's run alternates them step by step
 * instead (`pairedRates`).
 */
export async function compareRates(
  ours: () => Promise<unknown> | unknown,
  reference: () => Promise<unknown> | unknown,
  durationMs: number,
  batch: number,
  rounds = 3,
): Promise<[number, number]> {
  if (CHECK) return pairedRates(ours, reference, durationMs, batch);
  let best: [number, number] = [0, 0];
  for (let round = 0; round < rounds; round++) {
    best = [
      Math.max(best[0], await opsPerSecond(ours, durationMs / rounds, batch)),
      Math.max(best[1], await opsPerSecond(reference, durationMs / rounds, batch)),
    ];
  }
  return best;
}

/**
 * What a ratio of HTTP rounds compares: each side's best round; in the guard's run, where a busy
 * machine moved both sides' rates between rounds by a factor of 3, the requests per second of the
 * servers' CPU, each side's median round (README.md, "The guard").
 */
export function roundsCompared(
  ours: readonly { rps: number; perCpuSecond: number }[],
  reference: readonly { rps: number; perCpuSecond: number }[],
): [number, number] {
  // A round that ended before its first answer says nothing.
  const perCpuSecond = (results: readonly { perCpuSecond: number }[]) => median(results.map((result) => result.perCpuSecond).filter((value) => value > 0));
  if (CHECK) return [perCpuSecond(ours), perCpuSecond(reference)];
  return [Math.max(...ours.map((result) => result.rps)), Math.max(...reference.map((result) => result.rps))];
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export const fmt = (value: number, digits = 0) => value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });

export function header(title: string): void {
  console.log(`\n## ${title}\n`);
}

export function table(rows: Row[]): void {
  const width = Math.max(...rows.map((row) => row.name.length));
  for (const row of rows)
    console.log(`${row.name.padEnd(width)}  ${fmt(row.value, row.value < 100 ? 2 : 0).padStart(12)} ${row.unit}${row.note ? `  (${row.note})` : ''}`);
}

/** Prints `ours / reference` with the target (none when null), and returns whether it was met. */
export function ratio(label: string, ours: number, reference: number, target: number | null, higherIsBetter = true): boolean {
  const value = ours / reference;
  const ratiosFile = process.env[RATIOS_FILE_ENV];
  if (ratiosFile) appendFileSync(ratiosFile, JSON.stringify({ label, value }) + '\n');
  if (target === null) {
    console.log(`ratio ${label}: ${value.toFixed(2)}x (no target)`);
    return true;
  }
  const met = higherIsBetter ? value >= target : value <= target;
  console.log(`ratio ${label}: ${value.toFixed(2)}x (target ${higherIsBetter ? '>=' : '<='} ${target}x) ${met ? 'MET' : 'NOT MET'}`);
  return met;
}

export function machine(): string {
  const cpu = os.cpus()[0]?.model ?? 'unknown CPU';
  return `${os.cpus().length} x ${cpu}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}`;
}
