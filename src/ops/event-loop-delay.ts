import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';

/** How often the event loop's delay is sampled once the metrics have been scraped. */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** prom-client's gauges of its own sampler's histogram (its `eventLoopLag` default metric), and how each is read. */
const STATISTICS: [name: string, help: string, read: (histogram: RecordableHistogram) => number][] = [
  ['min', 'The minimum recorded event loop delay.', (histogram) => histogram.min],
  ['max', 'The maximum recorded event loop delay.', (histogram) => histogram.max],
  ['mean', 'The mean of the recorded event loop delays.', (histogram) => histogram.mean],
  ['stddev', 'The standard deviation of the recorded event loop delays.', (histogram) => histogram.stddev],
  ['p50', 'The 50th percentile of the recorded event loop delays.', (histogram) => histogram.percentile(50)],
  ['p90', 'The 90th percentile of the recorded event loop delays.', (histogram) => histogram.percentile(90)],
  ['p99', 'The 99th percentile of the recorded event loop delays.', (histogram) => histogram.percentile(99)],
];

/** The names prom-client's defaults give those gauges, under `prefix`. */
export function eventLoopDelayNames(prefix: string): string[] {
  return STATISTICS.map(([statistic]) => `${prefix}nodejs_eventloop_lag_${statistic}_seconds`);
}

/**
 * prom-client's gauges of the event loop's delay, sampled from the first scrape on instead of from
 * the start: the sampler wakes the process every EVENT_LOOP_SAMPLE_MS, most of an idle service's
 * wake-ups (bench/README.md, idle), and nothing reads what it samples until something scrapes.
 * A sample is how late the sampler's tick came (a timer of its own, not a shared tick of ticks.ts, whose
 * tasks before it would count as delay). Node's own sampler (`monitorEventLoopDelay`, which
 * prom-client uses) records the whole period with it, and forgets its last tick when reset at each
 * scrape, so a stall just after a scrape went unseen. Each scrape reports the delays since the one
 * before; one with no new sample repeats the figures before it (0 until the first). Returns the stop.
 */
export function registerEventLoopDelay(registry: Registry, prefix: string): () => void {
  const histogram = createHistogram();
  let sampler: NodeJS.Timeout | null = null;
  let lastTick = 0;
  const tick = () => {
    const now = performance.now();
    // In nanoseconds, at least 1: the histogram records positive integers, and a tick is never early by more than rounding.
    histogram.record(Math.max(1, Math.round((now - lastTick - EVENT_LOOP_SAMPLE_MS) * 1e6)));
    lastTick = now;
  };
  const gauges = STATISTICS.map(([, help, read], index) => ({
    read,
    gauge: new Gauge({
      name: eventLoopDelayNames(prefix)[index]!,
      help,
      registers: [registry],
      // The first gauge's collect sets them all from one reading, then starts the next interval.
      collect: index === 0 ? collect : undefined,
    }),
  }));
  function collect() {
    if (!sampler) {
      lastTick = performance.now();
      sampler = setInterval(tick, EVENT_LOOP_SAMPLE_MS).unref();
    }
    if (histogram.count === 0) return;
    for (const { gauge, read } of gauges) gauge.set(read(histogram) / 1e9);
    histogram.reset();
  }
  return () => {
    if (sampler) clearInterval(sampler);
    sampler = null;
  };
}
