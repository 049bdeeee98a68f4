import perfHooks, { type IntervalHistogram } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';

/** How often the event loop's delay is sampled once the metrics have been scraped. */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** prom-client's gauges of its own sampler's histogram (its `eventLoopLag` default metric), and how each is read. */
const STATISTICS: [name: string, help: string, read: (histogram: IntervalHistogram) => number][] = [
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
 * prom-client's gauges of the event loop's delay, with the sampling started by the first scrape
 * instead of at start-up: the sampler's timer wakes the process every EVENT_LOOP_SAMPLE_MS, most of
 * an idle service's wake-ups (bench/README.md, idle), and nobody reads what it samples until something scrapes.
 * Each scrape reports the delays since the one before; with no sample yet (the first scrape) the
 * gauges read NaN, not a delay nobody measured.
 */
export function registerEventLoopDelay(registry: Registry, prefix: string): void {
  let histogram: IntervalHistogram | null = null;
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
    if (!histogram) {
      histogram = perfHooks.monitorEventLoopDelay({ resolution: EVENT_LOOP_SAMPLE_MS });
      histogram.enable();
    }
    const sampled = histogram.count > 0;
    for (const { gauge, read } of gauges) gauge.set(sampled ? read(histogram) / 1e9 : NaN);
    histogram.reset();
  }
}
