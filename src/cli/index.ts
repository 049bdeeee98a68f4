/** The commands of the `mothership` CLI other than `serve` (main.ts dispatches to them). */
export { compareCommand, historyCommand, pushCommand, validateCommand } from './baseline.js';
export { createBotCommand, workerCommand } from './enrichment.js';
export { mqttCleanupCommand } from './mqtt.js';
