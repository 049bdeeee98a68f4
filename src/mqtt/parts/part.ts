import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../../db/index.js';
import type { EventLog } from '../../events/index.js';
import type { ThrottledLog } from '../../http/index.js';
import type { Metrics } from '../../ops/index.js';
import type { PresenceService } from '../../presence/index.js';
import type { IntegrationSettings } from '../../settings/index.js';
import type { OwnerReport } from '../leadership.js';
import type { TakeoverPolicy } from '../takeover.js';

/**
 * One concern of the MQTT integration, after Zigbee2MQTT's extensions (lib/extension/extension.ts):
 * the constructor only keeps its dependencies; `start` subscribes to what the part follows (the
 * connection's events, the event log), `stop` lets go of it. `offline`: whether the connection says
 * `offline` when it closes (not when another instance may already have taken over).
 */
export interface MqttPart {
  start(): Promise<void>;
  stop(options: { offline: boolean }): Promise<void>;
}

/** What the integration needs from the rest of the service. */
export interface MqttDependencies {
  database: Database;
  presence: PresenceService;
  events: EventLog;
  mothershipId: string;
  /** The reconnect schedule, and the takeover rule (MQTT_TAKEOVER_*: another client with our client id). */
  backoff: { initialMs: number; maxMs: number; takeover: TakeoverPolicy };
  /** Home Assistant's birth message is answered after a random delay up to this (0: at once). */
  birthDelayMaxMs: number;
  /** Who owns MQTT among instances on one PostgreSQL database; none: this process always does. */
  ownership?: {
    status(): { role: 'leader' | 'standby'; leader_since: string | null; owner: OwnerReport | null };
    report(status: Omit<OwnerReport, 'leader_since'>): void;
  } | null;
  metrics: Metrics | null;
  log: FastifyBaseLogger;
  /** The saved MQTT settings (a standby has no connection of its own to remember them by). */
  savedSettings: () => Promise<IntegrationSettings['mqtt']>;
  /** For what can repeat every poll or every message (the database away, a flood). */
  throttledLog: ThrottledLog;
}
