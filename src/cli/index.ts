/** The commands of the `mothership` CLI other than `serve` (main.ts dispatches to them). */
export { compareCommand, historyCommand, pushCommand, validateCommand } from './baseline.js';
export { botsCommand, localBots, missingLocalDatabase, RUN_WHERE_THE_SERVER_RUNS } from './bots.js';
export { workerCommand } from './enrichment.js';
export { mqttCleanupCommand } from './mqtt.js';
export { UsageError } from './server.js';
