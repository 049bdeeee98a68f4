import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { eventLoopDelayNames, registerEventLoopDelay } from './event-loop-delay.js';
import { HttpRequestStats } from './request-metrics.js';

/**
 * The period prom-client's own sampler of the event loop's delay is given: 24.8 days, the longest
 * Node's timers take. It cannot be left out of the defaults; event-loop-delay.ts samples instead,
 * only once the metrics are scraped. Its setImmediate gauge, `nodejs_eventloop_lag_seconds`, stays.
 */
const NEVER_MS = 2 ** 31 - 1;
/** The prefix of prom-client's default (process) metrics, as of every metric of ours. */
const PROCESS_METRICS_PREFIX = 'mothership_';
/**
 * prom-client's default gauges named like counters (`_total`), which `promtool check metrics`
 * refuses; each is the sum of its by-type gauge (`nodejs_active_handles{type}`, ...), which stays.
 */
const MISNAMED_DEFAULT_GAUGES = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/** Every Prometheus metric of one service instance (a registry per instance keeps tests independent). */
export class Metrics {
  readonly registry = new Registry();
  readonly events = new Counter({
    name: 'mothership_events_total',
    help: 'Events appended to the log',
    labelNames: ['event_type'],
    registers: [this.registry],
  });
  readonly webhookDeliveries = new Counter({
    name: 'mothership_webhook_deliveries_total',
    help: 'Webhook delivery attempts by outcome',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly webhookDuration = new Histogram({
    name: 'mothership_webhook_delivery_seconds',
    help: 'Webhook delivery attempt duration',
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly mqttConnected = new Gauge({ name: 'mothership_mqtt_connected', help: '1 when the MQTT client is connected', registers: [this.registry] });
  readonly mqttPublishes = new Counter({ name: 'mothership_mqtt_publishes_total', help: 'MQTT messages published', registers: [this.registry] });
  readonly mqttReconnects = new Counter({ name: 'mothership_mqtt_reconnect_attempts_total', help: 'MQTT reconnect attempts', registers: [this.registry] });
  readonly mqttCutShort = new Counter({
    name: 'mothership_mqtt_sessions_cut_short_total',
    help: 'MQTT connections the broker closed soon after accepting them (MQTT_TAKEOVER_SESSION_MS): another client with the same client id, most likely',
    registers: [this.registry],
  });
  readonly mqttClientIdConflict = new Gauge({
    name: 'mothership_mqtt_client_id_conflict',
    help: '1 while another client keeps connecting with the installation client id (the service backs off)',
    registers: [this.registry],
  });
  readonly mqttRefusals = new Counter({
    name: 'mothership_mqtt_refusals_total',
    help: 'Publishes and subscriptions the MQTT broker refused (MQTT 5 reason codes; its ACL most often), by kind and reason',
    labelNames: ['kind', 'reason'],
    registers: [this.registry],
  });
  readonly mqttCommands = new Counter({
    name: 'mothership_mqtt_commands_total',
    help: 'MQTT commands received (mode, Home Assistant birth) by outcome: accepted, invalid, rate_limited',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: 'mothership_ratelimit_rejections_total',
    help: 'Requests rejected by the rate limiter',
    labelNames: ['group'],
    registers: [this.registry],
  });
  readonly rateLimitStoreErrors = new Counter({
    name: 'mothership_ratelimit_store_errors_total',
    help: 'Rate-limit checks that could not reach the store (answered per RATE_LIMIT_REDIS_FAILURE)',
    registers: [this.registry],
  });
  /** RED: every answered request (request-metrics.ts). */
  readonly http = new HttpRequestStats();
  readonly enrichmentJobs = new Counter({
    name: 'mothership_enrichment_jobs_total',
    help: 'Enrichment jobs by outcome',
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  private readonly stopEventLoopDelay: () => void;

  constructor() {
    collectDefaultMetrics({ register: this.registry, prefix: PROCESS_METRICS_PREFIX, eventLoopMonitoringPrecision: NEVER_MS });
    const replaced = [...MISNAMED_DEFAULT_GAUGES.map((gauge) => PROCESS_METRICS_PREFIX + gauge), ...eventLoopDelayNames(PROCESS_METRICS_PREFIX)];
    for (const name of replaced) this.registry.removeSingleMetric(name);
    this.stopEventLoopDelay = registerEventLoopDelay(this.registry, PROCESS_METRICS_PREFIX);
    for (const metric of this.http.metrics()) this.registry.registerMetric(metric);
  }

  /** Stops what runs for the metrics between scrapes (the event loop's sampler). */
  close(): void {
    this.stopEventLoopDelay();
  }

  /** A counter read at scrape time from a total kept elsewhere (another thread's failures...). */
  counter(name: string, help: string, read: () => number): void {
    new Counter({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(read());
      },
    });
  }

  /** A gauge read at scrape time (queue depth, outbox size...). */
  gauge(name: string, help: string, read: () => Promise<number>): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      async collect() {
        this.set(await read());
      },
    });
  }
}
