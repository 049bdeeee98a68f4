import autocannon from 'autocannon';
import { signedRequests, type SignedPlan } from './signed-requests.js';
import { zoneEntries, type ZonePlan } from './zone-entries.js';

/** One run of the load generator, as plain data (it crosses from the benchmark's process). */
export interface LoadRequest {
  options: Omit<autocannon.Options, 'requests' | 'setupClient'>;
  /** Sign every request as a bot would. */
  signed?: SignedPlan;
  /** Zone entries, as sensing nodes send them. */
  zones?: ZonePlan;
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  total: number;
  /** Answers by HTTP status. */
  statuses: Record<string, number>;
}

/**
 * Runs autocannon and reduces its result to what the benchmarks report. Throughput is requests
 * over the time from the start to the last response: with `amount`, autocannon only notices the end
 * at its next one-second tick and reports that rounded-up duration, which understates a short run
 * (README.md, "How they measure").
 */
async function run({ options, signed, zones }: LoadRequest): Promise<LoadResult> {
  // A run of a known size is signed before it starts, so the generator's signing is not what bounds it.
  const requests = signed ? [signedRequests(signed, options.amount ?? 0)] : zones ? [zoneEntries(zones)] : undefined;
  const started = performance.now();
  let lastResponse = started;
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon({ ...options, ...(requests ? { requests } : {}) }, (error, finished) => (error ? reject(error) : resolve(finished)));
    instance.on('response', () => {
      lastResponse = performance.now();
    });
  });
  return {
    // A round on a very busy machine may end before its first answer.
    rps: result.requests.total ? result.requests.total / ((lastResponse - started) / 1000) : 0,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
    total: result.requests.total,
    statuses: Object.fromEntries(Object.entries(result.statusCodeStats ?? {}).map(([status, stats]) => [status, stats.count ?? 0])),
  };
}

// The load generator's own process (forked by harness.ts): one run per message, answered in order;
// it ends with the benchmark that forked it.
process.on('message', (message: { id: number; request: LoadRequest }) => {
  run(message.request).then(
    (result) => process.send!({ id: message.id, result }),
    (error: Error) => process.send!({ id: message.id, error: error.message }),
  );
});
process.on('disconnect', () => process.exit(0));
