import { readFileSync } from 'node:fs';

/** bench/floors.json: per benchmark, the lowest each of its ratios may read (README.md, "The guard"). */
export type Floors = Record<string, Record<string, number>>;

/** A ratio as a benchmark printed it. */
export interface Measured {
  label: string;
  value: number;
}

export const DEFAULT_FLOORS = new URL('../../bench/floors.json', import.meta.url);

export function readFloors(path: string | URL): Floors {
  return JSON.parse(readFileSync(path, 'utf8')) as Floors;
}

/**
 * Each floored ratio against what the run measured: a line per ratio, and whether all held. A ratio
 * measured more than once counts at its lowest; one not measured at all fails, so a renamed label
 * cannot switch the guard off.
 */
export function checkFloors(floors: Floors, measured: readonly Measured[]): { lines: string[]; held: boolean } {
  const lines: string[] = [];
  let held = true;
  for (const [benchmark, ratios] of Object.entries(floors))
    for (const [label, floor] of Object.entries(ratios)) {
      const values = measured.filter((entry) => entry.label === label).map((entry) => entry.value);
      if (!values.length) {
        held = false;
        lines.push(`FELL ${benchmark}: "${label}" was not measured (floor ${floor}x)`);
        continue;
      }
      const value = Math.min(...values);
      // NaN (nothing measured in any round) falls too.
      const fell = !(value >= floor);
      if (fell) held = false;
      lines.push(`${fell ? 'FELL' : 'held'} ${benchmark}: ${label} ${value.toFixed(2)}x (floor ${floor}x)`);
    }
  return { lines, held };
}
