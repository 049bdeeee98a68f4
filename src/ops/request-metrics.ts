import { METHODS } from 'node:http';
import type { FastifyInstance } from 'fastify';
import type { Metric, MetricValue, MetricValueWithName } from 'prom-client';

/** The latency buckets of `mothership_http_request_duration_seconds`, in seconds (docs/operations.md). */
export const HTTP_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** The route label of a request no route matched (404s, 405s, refused framing): one value, whatever the URL. */
export const UNMATCHED_ROUTE = 'unmatched';

/** Node's parser accepts only these methods, so the label is bounded; anything else would be `OTHER`. */
const KNOWN_METHODS = new Set(METHODS);

/** One route template and method: answers by status class (index 1 to 5) and latency bucket counts (the last one +Inf). */
interface Series {
  labels: { route: string; method: string };
  byClass: number[];
  buckets: number[];
  sum: number;
}

/**
 * RED counts of every answered request, kept as plain numbers per route template and method and read
 * by Prometheus at scrape time: prom-client's own counter and histogram hash and validate the label
 * set on every call, which cost more than the rest of the metrics per request.
 */
export class HttpRequestStats {
  private readonly series = new Map<string, Series>();

  record(route: string, method: string, status: number, seconds: number): void {
    const key = `${method} ${route}`;
    let series = this.series.get(key);
    if (!series) {
      series = { labels: { route, method }, byClass: [0, 0, 0, 0, 0, 0], buckets: new Array<number>(HTTP_DURATION_BUCKETS.length + 1).fill(0), sum: 0 };
      this.series.set(key, series);
    }
    series.byClass[Math.floor(status / 100)]!++;
    let bucket = 0;
    while (bucket < HTTP_DURATION_BUCKETS.length && seconds > HTTP_DURATION_BUCKETS[bucket]!) bucket++;
    series.buckets[bucket]!++;
    series.sum += seconds;
  }

  private requests(): MetricValue<string>[] {
    return [...this.series.values()].flatMap(({ labels, byClass }) =>
      byClass.flatMap((value, statusClass) => (value ? [{ labels: { ...labels, status_class: `${statusClass}xx` }, value }] : [])),
    );
  }

  private durations(name: string): MetricValueWithName<string>[] {
    return [...this.series.values()].flatMap(({ labels, buckets, sum }) => {
      let cumulative = 0;
      const values = buckets.map((count, bucket) => {
        cumulative += count;
        return { metricName: `${name}_bucket`, labels: { ...labels, le: HTTP_DURATION_BUCKETS[bucket] ?? '+Inf' }, value: cumulative };
      });
      return [...values, { metricName: `${name}_sum`, labels, value: sum }, { metricName: `${name}_count`, labels, value: cumulative }];
    });
  }

  /**
   * The two metrics as a prom-client registry reads any metric (`get()` at scrape time); its types
   * name only its own classes, hence the cast.
   */
  metrics(): Metric[] {
    const metric = (name: string, help: string, type: 'counter' | 'histogram', values: () => MetricValue<string>[]) =>
      ({
        name,
        help,
        type,
        get: () => ({ name, help, type, aggregator: 'sum', values: values() }),
        reset: () => {},
      }) as unknown as Metric;
    const duration = 'mothership_http_request_duration_seconds';
    return [
      metric(
        'mothership_http_requests_total',
        'HTTP requests answered, by route template (unmatched: no route), method and status class (2xx, 4xx, 5xx, ...)',
        'counter',
        () => this.requests(),
      ),
      metric(duration, 'HTTP request duration from routing to the last byte written, by route template and method', 'histogram', () =>
        this.durations(duration),
      ),
    ];
  }
}

/**
 * RED metrics for every answered request, by route template (never the URL, so the label values are
 * bounded), method and status class, with its latency.
 */
export function requestMetrics(app: FastifyInstance, stats: HttpRequestStats): void {
  app.addHook('onResponse', (request, reply, done) => {
    const method = KNOWN_METHODS.has(request.method) ? request.method : 'OTHER';
    stats.record(request.routeOptions.url ?? UNMATCHED_ROUTE, method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}
