import { EventEmitter } from 'node:events';
import type { IntegrationSettings } from '../../settings/index.js';
import { VERSION } from '../../version.js';
import { MqttConnection, NO_CONNECTION, testConnection, type MqttSettings, type MqttStatus } from '../connection.js';
import type { DiscoveryContext } from '../discovery.js';
import { RefusalLog } from '../refusals.js';
import { logConnectionChange, NOTHING_LOGGED } from '../status-log.js';
import { Topics } from '../topics.js';
import type { MqttDependencies, MqttPart } from './part.js';

type DiscoveryMode = IntegrationSettings['mqtt']['discovery_mode'];
/** Where the entities live: the topics and the discovery form. */
export interface Placement {
  topics: Topics;
  mode: DiscoveryMode;
}

/** What a connection does before it closes for new settings or a stop, while still connected. */
export interface Farewell {
  /** Moved to another topic root, discovery prefix or discovery mode: leave the old place. */
  leave(connection: MqttConnection, old: Placement, next: Placement): Promise<void>;
  offline(connection: MqttConnection): Promise<void>;
}

export interface ConnectionEvents {
  /** The broker accepted a connection (first or again). */
  connected: [connection: MqttConnection];
  message: [topic: string, payload: string, retained: boolean];
  /** `current`: the status is the current connection's (a closing one's last word is not). */
  status: [status: MqttStatus & { enabled: boolean }, current: boolean];
}

/**
 * The connection part: applies settings one save at a time (the old connection says its farewell and
 * closes, a new one opens), keeps the current connection, topics and settings for the other parts,
 * and tells them when it connects, what arrives, and how it is.
 */
export class ConnectionPart implements MqttPart {
  connection: MqttConnection | null = null;
  settings: MqttSettings | null = null;
  topics: Topics | null = null;
  readonly events = new EventEmitter<ConnectionEvents>();
  /** The settings asked for last (null once stopped), and the queue of connection changes. */
  private wanted: MqttSettings | null = null;
  private lifecycle: Promise<void> = Promise.resolve();
  private readonly refusals: RefusalLog;

  constructor(
    private readonly deps: MqttDependencies,
    private readonly farewell: Farewell,
  ) {
    this.refusals = new RefusalLog(deps);
  }

  get clientId(): string {
    return `mothership-${this.deps.mothershipId}`;
  }

  /** A client id for a short-lived connection beside the installation's own. */
  oneOffClientId(purpose: string): string {
    return `${this.clientId}-${purpose}-${Math.random().toString(36).slice(2, 8)}`;
  }

  context(): DiscoveryContext {
    return { topics: this.topics!, version: VERSION };
  }

  ownStatus(): MqttStatus & { enabled: boolean } {
    return { enabled: Boolean(this.settings?.enabled), ...(this.connection?.status ?? NO_CONNECTION) };
  }

  /** Connects once with candidate settings (Test Connection); `detailed` errors only for the saved broker. */
  test(settings: MqttSettings, options: { detailed: boolean }) {
    return testConnection(settings, `${this.clientId}-test-${Math.random().toString(36).slice(2, 8)}`, options);
  }

  async start(): Promise<void> {}

  /**
   * Applies new settings at once: the old connection closes, a new one opens. Turned off or moved to
   * another broker, the old connection says `offline` first. Moved to another topic root, discovery
   * prefix or discovery mode, it leaves the old place instead (no `offline` for Home Assistant to act
   * on: a clean disconnect sends no Last Will), and the new connection publishes everything in the
   * new one.
   */
  configure(settings: IntegrationSettings['mqtt']): Promise<void> {
    this.wanted = settings;
    // Saves that arrive while one is being applied wait their turn, and only the latest is applied:
    // two applied at once would each open a connection under one client id, which the broker then
    // hands back and forth for ever.
    return this.inTurn(() => (this.wanted === settings ? this.apply(settings) : Promise.resolve()));
  }

  /** Closes the connection after the changes asked for before, saying `offline` first if asked. */
  stop({ offline }: { offline: boolean }): Promise<void> {
    this.wanted = null;
    return this.inTurn(async () => {
      const connection = this.connection;
      this.connection = null;
      if (connection) await connection.close(() => (offline ? this.farewell.offline(connection) : Promise.resolve()));
    });
  }

  /** Runs connection changes (configure, stop) one at a time, in the order they were asked for. */
  private inTurn(work: () => Promise<void>): Promise<void> {
    const turn = this.lifecycle.then(work);
    this.lifecycle = turn.catch(() => {});
    return turn;
  }

  private async apply(settings: IntegrationSettings['mqtt']): Promise<void> {
    const previous = this.connection;
    const old = this.topics && this.settings ? { topics: this.topics, mode: this.settings.discovery_mode } : null;
    const topics = new Topics(settings.topic_root, this.deps.mothershipId, settings.discovery_prefix, settings.birth_topic);
    const next = { topics, mode: settings.discovery_mode };
    const moving = Boolean(
      settings.enabled && settings.broker_url && old && (old.topics.base !== topics.base || old.topics.prefix !== topics.prefix || old.mode !== next.mode),
    );
    this.connection = null;
    if (previous) await previous.close(() => (moving ? this.farewell.leave(previous, old!, next) : this.farewell.offline(previous)));
    this.settings = settings;
    this.topics = topics;
    this.events.emit('status', this.ownStatus(), true);
    if (!settings.enabled || !settings.broker_url) return;
    this.connection = await this.open(settings, topics);
  }

  private async open(settings: MqttSettings, topics: Topics): Promise<MqttConnection> {
    let logged = NOTHING_LOGGED;
    const connection: MqttConnection = await MqttConnection.open(
      settings,
      this.clientId,
      { topic: topics.availability, payload: Buffer.from('offline'), qos: 1, retain: true },
      this.deps.backoff,
      {
        onConnect: () => this.events.emit('connected', connection),
        onStatus: (status) => {
          this.events.emit('status', { enabled: true, ...status }, this.connection === connection);
          logged = logConnectionChange(this.deps.log, logged, status);
        },
        onReconnectAttempt: () => this.deps.metrics?.mqttReconnects.inc(),
        onCutShort: () => this.deps.metrics?.mqttCutShort.inc(),
        onRefusal: (refused) => this.refusals.report(refused),
      },
    );
    connection.client.on('message', (topic, payload, packet) => this.events.emit('message', topic, payload.toString('utf8'), packet.retain));
    return connection;
  }
}
