import { compareBaselines } from '../src/baselines/compare.js';
import { DEFAULT_DETECTION, detectRegression, type Run } from '../src/baselines/detect.js';
import type { BaselineRecord } from '../src/baselines/schema.js';
import { QUICK, header, ratio } from './lib.js';

/**
 * The regression detector against the plain rule (head vs the previous run, 10 % threshold) on
 * synthetic CI histories with known truth: a shared runner whose speed wanders (every time scales
 * with it) plus our own run-to-run noise; then a step change of our subject, and a slow drift.
 * Seeded, so every run prints the same figures.
 */
export async function benchDetector(): Promise<boolean> {
  header('Baselines: regression detection against the plain threshold rule');
  const histories = QUICK ? 20 : 400;
  const length = 30;
  const stepAt = 20;
  const random = mulberry32(20261123);
  const gaussian = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const MACHINE_SD = 0.05;
  const OWN_SD = 0.015;

  const record = (index: number, ours: number): Run => {
    const machine = Math.exp(MACHINE_SD * gaussian());
    const own = ours * Math.exp(OWN_SD * gaussian());
    const sha = index.toString(16).padStart(7, '0');
    const run: BaselineRecord = {
      commit_sha: sha,
      timestamp: new Date(Date.UTC(2026, 10, 1, index)).toISOString(),
      subject_geomean: 0.5 * own * machine,
      alpha_geomean: 1.5 * machine,
      beta_geomean: 1.0 * machine,
      gamma_geomean: 2.0 * machine,
      grep_1000_mean_ms: 40 * own * machine,
    };
    return { commit_sha: sha, record: run };
  };
  const scenarios: { name: string; ours: (index: number) => number; changedAt: number | null }[] = [
    { name: 'noise only', ours: () => 1, changedAt: null },
    { name: 'step +15% at run 20', ours: (index) => (index >= stepAt ? 1.15 : 1), changedAt: stepAt },
    { name: 'drift +1%/run from run 10', ours: (index) => 1 + 0.01 * Math.max(0, index - 10), changedAt: 20 },
  ];

  // With fewer than minRuns earlier commits the detector falls back to the threshold: counted apart.
  const fullFrom = DEFAULT_DETECTION.minRuns;
  console.log(`scenario                    rule       false alarms (runs 1-${fullFrom - 1} / ${fullFrom}+)   missed   runs to detect (median)`);
  const rates: Record<string, { falseAlarms: number; evaluated: number }> = {
    plain: { falseAlarms: 0, evaluated: 0 },
    detector: { falseAlarms: 0, evaluated: 0 },
  };
  let stepMissedByDetector = 0;
  for (const scenario of scenarios) {
    const fresh = () => ({ alarms: 0, clean: 0, earlyAlarms: 0, earlyClean: 0, missed: 0, delays: [] as number[] });
    const stats = { plain: fresh(), detector: fresh() };
    for (let history = 0; history < histories; history++) {
      const runs = Array.from({ length }, (_, index) => record(index, scenario.ours(index)));
      const firstFlag = { plain: null as number | null, detector: null as number | null };
      for (let index = 1; index < length; index++) {
        const verdicts = {
          plain: compareBaselines(runs[index - 1]!.record, runs[index]!.record).regressed,
          detector: detectRegression(runs.slice(0, index), [runs[index]!]).regressed,
        };
        for (const rule of ['plain', 'detector'] as const) {
          // Before the change every alarm is false; after it, the first alarm is the detection.
          if (scenario.changedAt === null || index < scenario.changedAt - (scenario.name.startsWith('drift') ? 5 : 0)) {
            const early = index < fullFrom;
            if (early) stats[rule].earlyClean++;
            else stats[rule].clean++;
            if (verdicts[rule] && early) stats[rule].earlyAlarms++;
            else if (verdicts[rule]) stats[rule].alarms++;
          } else if (index >= scenario.changedAt && verdicts[rule] && firstFlag[rule] === null) firstFlag[rule] = index;
        }
      }
      for (const rule of ['plain', 'detector'] as const) {
        if (scenario.changedAt === null) continue;
        if (firstFlag[rule] === null) stats[rule].missed++;
        else stats[rule].delays.push(firstFlag[rule]! - scenario.changedAt);
      }
    }
    for (const rule of ['plain', 'detector'] as const) {
      const { alarms, clean, earlyAlarms, earlyClean, missed, delays } = stats[rule];
      rates[rule]!.falseAlarms += alarms;
      rates[rule]!.evaluated += clean;
      if (rule === 'detector' && scenario.name.startsWith('step')) stepMissedByDetector = missed / histories;
      const median = delays.sort((a, b) => a - b)[Math.floor(delays.length / 2)];
      const pct = (value: number, of: number) => (of ? `${((100 * value) / of).toFixed(1)}%` : '-');
      console.log(
        `${scenario.name.padEnd(28)}${rule.padEnd(11)}${`${pct(earlyAlarms, earlyClean)} / ${pct(alarms, clean)}`.padStart(26)}${(scenario.changedAt === null ? '-' : pct(missed, histories)).padStart(9)}   ${median === undefined ? '-' : `${median} run${median === 1 ? '' : 's'} after the change`}`,
      );
    }
  }
  console.log(`(${histories} histories of ${length} runs per scenario; machine noise ${MACHINE_SD * 100}% and own noise ${OWN_SD * 100}% per run, log-normal)`);
  const falseAlarmRate = (rule: string) => rates[rule]!.falseAlarms / Math.max(1, rates[rule]!.evaluated);
  const fewerAlarms = ratio(
    `false alarms with ${fullFrom}+ earlier runs, detector / plain rule`,
    falseAlarmRate('detector'),
    Math.max(falseAlarmRate('plain'), 1e-9),
    0.2,
    false,
  );
  console.log(
    `step changes missed by the detector: ${(stepMissedByDetector * 100).toFixed(1)}% (target <= 5%) ${stepMissedByDetector <= 0.05 ? 'MET' : 'NOT MET'}`,
  );
  return fewerAlarms && (QUICK || stepMissedByDetector <= 0.05);
}

/** A small seeded PRNG (public domain), so every run sees the same histories. */
function mulberry32(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
