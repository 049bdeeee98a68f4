import { describe, it } from 'node:test';
import { runsQuick } from './helpers/bench.js';

/** The benchmarks that start services, brokers and load generators: the other half of bench.test.ts's proof that each still runs. */
describe('benchmarks with servers (quick size)', () => {
  it('the HTTP and MQTT benchmarks run and print their ratios against the reference', () =>
    runsQuick(['enrichment', 'fanout', 'ingest', 'mqtt-sync', 'idle'], ['Enrichment endpoint', 'Event fan-out', 'Event ingest', 'MQTT full sync', 'Idle'], 5));
});
