import type { Config } from '../config.js';
import { ID_PATTERN } from '../ids.js';
import { cleanupRefusal, clearInstallation, describeMqttError } from '../mqtt/index.js';
import { openInstallation, servedInstallation } from '../ops/index.js';
import { createEventPipeline } from '../pipeline.js';
import type { Output } from './io.js';

/**
 * `mothership mqtt cleanup --installation ID`: clears, on the configured broker, every retained
 * discovery config and state topic a previous installation id left (a lost DATA_DIR gives a new id,
 * and Home Assistant would keep the old device forever).
 */
export async function mqttCleanupCommand(config: Config, installation: string, io: Output): Promise<number> {
  if (!ID_PATTERN.test(installation)) {
    io.err(`--installation must be an installation id (${ID_PATTERN}), got "${installation}"`);
    return 2;
  }
  const refusal = cleanupRefusal(installation, config.mothershipId);
  if (refusal) {
    io.err(refusal);
    return 2;
  }
  const { database, box } = await openInstallation(config);
  const [settings, served] = await Promise.all([createEventPipeline(database, box).settings.get(), servedInstallation(database)]).finally(() =>
    database.close(),
  );
  // The shell's MOTHERSHIP_ID may not be the service's: the id the server last ran as is live too.
  const servedRefusal = served === undefined ? null : cleanupRefusal(installation, served);
  if (servedRefusal) {
    io.err(servedRefusal);
    return 2;
  }
  if (!settings.mqtt.broker_url) {
    io.err('no MQTT broker is configured (settings, mqtt.broker_url)');
    return 2;
  }
  try {
    const { cleared, filters } = await clearInstallation(settings.mqtt, `mothership-${config.mothershipId}-cleanup`, installation);
    io.out(`cleared ${cleared} retained message${cleared === 1 ? '' : 's'} of installation ${installation} (${filters.join(', ')})`);
    return 0;
  } catch (error) {
    io.err(`could not reach the broker: ${describeMqttError(error as Error & { code?: string | number })}`);
    return 1;
  }
}
