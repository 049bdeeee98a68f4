import { benchApp } from './harness.js';
import { QUICK, fmt, header, ratio } from './lib.js';

const mib = (bytes: number) => bytes / 2 ** 20;

function settle(): number {
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().rss;
}

/**
 * Resident memory with 1,000 persons, 200 zones and 1,000,000 events in the log (appended through the
 * event log in batches of 1,000, as the ingest path writes them): it must stay flat as the log grows.
 * The reference is the RSS after the first quarter of the events.
 */
export async function benchMemory(): Promise<boolean> {
  header('Memory: RSS while the event log grows');
  const totalEvents = QUICK ? 20_000 : 1_000_000;
  const { app, close } = await benchApp('sqlite', { HEALTH_INTERVAL_MS: '3600000' });
  try {
    for (let p = 0; p < 1000; p++) await app.presence.createPerson({ id: `p${p}`, name: `Person ${p}` });
    for (let z = 0; z < 200; z++) await app.presence.createZone({ id: `z${z}`, name: `Zone ${z}` });
    const checkpoints: { events: number; rss: number }[] = [{ events: 0, rss: settle() }];
    const batch = 1000;
    for (let written = 0; written < totalEvents; written += batch) {
      await app.events.write(async (_trx, emit) => {
        for (let n = 0; n < batch; n++)
          emit('anomaly.detected', { zone: `z${n % 200}`, person: `p${n % 1000}`, severity: 'warning', detail: { n: written + n } });
      });
      if ((written + batch) % (totalEvents / 4) === 0) checkpoints.push({ events: written + batch, rss: settle() });
    }
    for (const point of checkpoints) console.log(`${fmt(point.events).padStart(10)} events   RSS ${mib(point.rss).toFixed(1)} MiB`);
    const quarter = checkpoints[1]!.rss;
    const end = checkpoints.at(-1)!.rss;
    console.log(`growth from ${fmt(totalEvents / 4)} to ${fmt(totalEvents)} events: ${mib(end - quarter).toFixed(1)} MiB`);
    return ratio('RSS at the end vs after the first quarter', end, quarter, 1.1, false);
  } finally {
    await close();
  }
}
