/**
 * The attack's normal client (bench/attack.ts) on a thread of its own: the attackers' loops and the
 * MQTT flood keep the attack's main thread busy, and their delays must not count as the service's.
 * One zone move and one read every 100 ms until `untilMs`; posts back the latencies, sorted, all and the moves'.
 */
import { parentPort, workerData } from 'node:worker_threads';

/** `ingest` writes its zone moves, `read` reads (each token's scope allows only its half). */
const { base, ingest, read, untilMs } = workerData as { base: string; ingest: string; read: string; untilMs: number };
const call = (token: string, method: string, url: string, body?: unknown) =>
  fetch(base + url, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });

const latencies: number[] = [];
/** The zone moves' latencies alone: a write waits for the append's turn, a read does not. */
const writes: number[] = [];
const statuses: Record<number, number> = {};
for (let i = 0; Date.now() < untilMs; i++) {
  const started = performance.now();
  const response =
    i % 2 === 0
      ? await call(ingest, 'POST', '/api/events', { type: 'zone.entry', person: 'resident', zone: i % 4 === 0 ? 'hall' : 'kitchen' })
      : await call(read, 'GET', '/api/persons/resident');
  await response.arrayBuffer();
  const latency = performance.now() - started;
  latencies.push(latency);
  if (i % 2 === 0) writes.push(latency);
  statuses[response.status] = (statuses[response.status] ?? 0) + 1;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
const sorted = (values: number[]) => values.sort((a, b) => a - b);
parentPort!.postMessage({ latencies: sorted(latencies), writes: sorted(writes), statuses });
