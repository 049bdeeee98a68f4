import type { SecretBox } from './crypto.js';
import type { Database } from './db/index.js';
import { EventLog, type AppendHook } from './events/index.js';
import { SettingsStore } from './settings/index.js';
import { WebhookOutbox } from './webhook/index.js';

/**
 * The event pipeline, built the same way by every process that writes events (`serve`, `worker`,
 * the CLI): an event is written together with its webhook outbox rows, whichever process writes it.
 * `guards` run last in each append and may refuse it (the serving process's storage budget: on
 * PostgreSQL before the rows are written, on SQLite after them and the outbox's, measuring what they take).
 */
export function createEventPipeline(
  database: Database,
  box: SecretBox,
  guards: AppendHook[] = [],
): { events: EventLog; settings: SettingsStore; outbox: WebhookOutbox } {
  const settings = new SettingsStore(database, box);
  const outbox = new WebhookOutbox(database, settings);
  const events = new EventLog(database, [outbox, ...guards]);
  return { events, settings, outbox };
}
