import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import { tailLog, type EventDetails, type EventLog, type StoredEvent } from '../events/index.js';
import { conflict, invalid, ProblemError } from '../http/problem.js';
import type { ThrottledLog } from '../http/index.js';
import type { Metrics } from '../ops/metrics.js';
import type { PersonView, PresenceService, ZoneView } from '../presence/service.js';
import type { IntegrationSettings } from '../settings/index.js';
import { VERSION } from '../version.js';
import { cleanupRefusal, clearInstallation } from './cleanup.js';
import {
  clientOptions,
  connectBroker,
  connected,
  describeMqttError,
  MqttConnection,
  NO_CONNECTION,
  testConnection,
  type MqttSettings,
  type MqttStatus,
} from './connection.js';
import { discoveryInForm, payloadText, personConfigs, zoneConfigs, type DiscoveryContext, type DiscoveryMessage } from './discovery.js';
import { personState, zoneState, type StateMessage } from './state.js';
import { Topics } from './topics.js';
import { interpretMessage } from './commands.js';
import { InboundGuard } from './inbound.js';
import type { OwnerReport } from './leadership.js';
import { emptyPending, hasWork, recordChange, type Pending } from './pending.js';
import { logConnectionChange, NOTHING_LOGGED } from './status-log.js';
import type { TakeoverPolicy } from './takeover.js';

export type { MqttStatus } from './connection.js';
export { MqttLeadership } from './leadership.js';

const RETAINED = { qos: 1 as const, retain: true };
/** Home Assistant's hand-over signal between the two discovery forms (mqtt/discovery.py). */
const MIGRATE_DISCOVERY = JSON.stringify({ migrate_discovery: true });
type DiscoveryMode = IntegrationSettings['mqtt']['discovery_mode'];
/**
 * A flush waits at most this long for the broker's acknowledgements. A dropped connection fails its
 * publishes at once; this bounds a connection that stays open but stops answering (until keepalive
 * notices), so later changes and shutdown never wait behind it.
 */
const FLUSH_TIMEOUT_MS = 10_000;
/** How long stop() lets the last flush finish before it closes the connection anyway. */
const STOP_GRACE_MS = 2000;
/**
 * How often the log is read for events other processes appended (other instances, a standalone
 * worker): their changes reach the broker within this; this process's own at once.
 */
const FOLLOW_POLL_MS = 250;
/** After a connect, how long the retained state topics are watched for entities deleted meanwhile. */
const STATE_CHECK_MS = 3000;
/** Publish Discovery on a standby corrects what changed while it published at most this often. */
const STANDBY_DISCOVERY_ROUNDS = 5;
/** A short-lived connection (Publish Discovery on a standby) gives up after this. */
const ONE_OFF_CONNECT_TIMEOUT_MS = 10_000;

/**
 * The MQTT integration (one extension per concern, after Zigbee2MQTT's lib/extension): mirrors the
 * service's state to retained topics, publishes Home Assistant discovery, answers Home Assistant's
 * birth message, accepts mode commands, and reconnects with backoff. It never queues while
 * disconnected: on every (re)connect it republishes the whole current state from the database.
 */
export class MqttIntegration {
  private connection: MqttConnection | null = null;
  private settings: MqttSettings | null = null;
  private topics: Topics | null = null;
  private pending = emptyPending();
  private flushing: Promise<void> | null = null;
  private expectedConfigs = new Set<string>();
  private lastHealth: (EventDetails['system.health'] & { timestamp: string }) | null = null;
  private stopFollowing: (() => void) | null = null;
  private birthTimer: NodeJS.Timeout | null = null;
  /** The settings asked for last (null once stopped), and the queue of connection changes. */
  private wanted: MqttSettings | null = null;
  private lifecycle: Promise<void> = Promise.resolve();
  /** Which inbound commands are followed (rate limits per topic) and how refusals are logged. */
  private readonly inbound: InboundGuard;

  constructor(
    private readonly deps: {
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
      /** For what can repeat every FOLLOW_POLL_MS (the database away). */
      throttledLog: ThrottledLog;
    },
  ) {
    this.inbound = new InboundGuard(deps);
  }

  get clientId(): string {
    return `mothership-${this.deps.mothershipId}`;
  }

  /**
   * The installation's connection: this instance's own when it owns MQTT, else as the owner last
   * reported it (read every 2 s), so every instance behind a load balancer says the same.
   */
  status(): MqttStatus & { enabled: boolean; role: 'leader' | 'standby'; leader_since: string | null } {
    const { owner, ...role } = this.deps.ownership?.status() ?? { role: 'leader' as const, leader_since: null, owner: null };
    // An owner of an earlier release reports no client_id_conflict.
    if (owner) return { client_id_conflict: false, ...owner, role: role.role };
    return { ...this.ownStatus(), ...role };
  }

  private ownStatus(): MqttStatus & { enabled: boolean } {
    return { enabled: Boolean(this.settings?.enabled), ...(this.connection?.status ?? NO_CONNECTION) };
  }

  /**
   * Applies new settings at once: the old connection closes, a new one opens. Turned off or moved to
   * another broker, the old connection says `offline` first. Moved to another topic root, discovery
   * prefix or discovery mode, it leaves the old place instead (see `leave`; no `offline` for Home
   * Assistant to act on: a clean disconnect sends no Last Will), and the new connection publishes
   * everything in the new one.
   */
  configure(settings: IntegrationSettings['mqtt']): Promise<void> {
    this.wanted = settings;
    // Saves that arrive while one is being applied wait their turn, and only the latest is applied:
    // two applied at once would each open a connection under one client id, which the broker then
    // hands back and forth for ever.
    return this.inTurn(() => (this.wanted === settings ? this.apply(settings) : Promise.resolve()));
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
    if (previous) await previous.close(() => (moving ? this.leave(previous, old!, next) : this.publishAvailability(previous, 'offline')));
    this.settings = settings;
    this.topics = topics;
    this.deps.metrics?.mqttConnected.set(0);
    this.deps.metrics?.mqttClientIdConflict.set(0);
    this.deps.ownership?.report(this.ownStatus());
    if (!settings.enabled || !settings.broker_url) return;
    let logged = NOTHING_LOGGED;
    const connection: MqttConnection = new MqttConnection(
      settings,
      this.clientId,
      { topic: topics.availability, payload: Buffer.from('offline'), qos: 1, retain: true },
      this.deps.backoff,
      {
        onConnect: () => void this.onConnect(connection).catch((error: Error) => this.deps.log.warn({ err: error }, 'MQTT sync failed')),
        onStatus: (status) => {
          this.deps.metrics?.mqttConnected.set(status.connected ? 1 : 0);
          this.deps.metrics?.mqttClientIdConflict.set(status.client_id_conflict ? 1 : 0);
          // A closing connection's last word must not overwrite what its successor reported.
          if (this.connection === connection) this.deps.ownership?.report({ enabled: true, ...status });
          logged = logConnectionChange(this.deps.log, logged, status);
        },
        onReconnectAttempt: () => this.deps.metrics?.mqttReconnects.inc(),
        onCutShort: () => this.deps.metrics?.mqttCutShort.inc(),
      },
    );
    connection.client.on(
      'message',
      (topic, payload, packet) =>
        void this.onMessage(topic, payload.toString('utf8'), packet.retain).catch((error: Error) =>
          this.deps.log.warn({ err: error, topic }, 'MQTT message handling failed'),
        ),
    );
    this.connection = connection;
  }

  /**
   * Follows the event log, whichever process appends to it, and connects with the saved settings.
   * Events from before the start need no replay: every connect publishes the current state.
   */
  async start(settings: IntegrationSettings['mqtt']): Promise<void> {
    this.stopFollowing ??= tailLog(this.deps.events, {
      pollMs: FOLLOW_POLL_MS,
      deliver: (page) => page.forEach((event) => this.onEvent(event)),
      onError: (error) =>
        this.deps.throttledLog.write(this.deps.log, 'mqtt-follow', 'warn', { err: error }, 'MQTT: reading the event log failed; trying again'),
    });
    await this.configure(settings);
  }

  /**
   * Stops following the log and closes the connection, saying `offline` first unless another
   * instance may already have taken over (ownership lost): its `online` must stand.
   */
  stop({ offline = true } = {}): Promise<void> {
    this.wanted = null;
    return this.inTurn(() => this.disconnect(offline));
  }

  private async disconnect(offline: boolean): Promise<void> {
    this.stopFollowing?.();
    this.stopFollowing = null;
    if (this.birthTimer) clearTimeout(this.birthTimer);
    this.birthTimer = null;
    const connection = this.connection;
    this.connection = null;
    // Closing fails whatever the broker has not acknowledged, which ends the flush.
    if (this.flushing) await Promise.race([this.flushing, delay(STOP_GRACE_MS, undefined, { ref: false })]);
    if (connection) await connection.close(() => (offline ? this.publishAvailability(connection, 'offline') : Promise.resolve()));
  }

  /** Connects once with candidate settings (Test Connection); `detailed` errors only for the saved broker. */
  test(settings: MqttSettings, options: { detailed: boolean }) {
    return testConnection(settings, `${this.clientId}-test-${Math.random().toString(36).slice(2, 8)}`, options);
  }

  /**
   * Clears what a previous installation id left retained on the saved broker (the dashboard's
   * cleanup; `mothership mqtt cleanup` from a shell). 400 for this installation's own id, 409 without
   * a saved broker, 502 when the broker cannot be reached.
   */
  async cleanupInstallation(installation: string): Promise<number> {
    const refusal = cleanupRefusal(installation, this.deps.mothershipId);
    if (refusal) throw invalid('/installation', refusal);
    const settings = await this.deps.savedSettings();
    if (!settings.broker_url) throw conflict('No MQTT broker is saved');
    try {
      return (await clearInstallation(settings, this.oneOffClientId('cleanup'), installation)).cleared;
    } catch (error) {
      throw unreachable(error);
    }
  }

  /** A client id for a short-lived connection beside the installation's own. */
  private oneOffClientId(purpose: string): string {
    return `${this.clientId}-${purpose}-${Math.random().toString(36).slice(2, 8)}`;
  }

  /**
   * Republishes every discovery config (Publish Discovery); 409 when not connected. On a standby
   * (another instance owns the connection), from a short-lived client of its own, as the cleanup
   * does: the configs are the owner's, read from the same database.
   */
  async publishDiscovery(): Promise<number> {
    if (this.deps.ownership?.status().role === 'standby') return this.publishDiscoveryFromStandby();
    const connection = this.connection;
    if (!connection?.client.connected) throw conflict('MQTT is not connected');
    const [persons, zones] = await Promise.all([this.deps.presence.listPersons(), this.deps.presence.listZones()]);
    const messages = this.discoveryMessages(persons, zones);
    await this.publishAll(connection, messages).catch((error: Error) => {
      throw conflict(`MQTT connection lost while publishing: ${error.message}`);
    });
    return messages.length;
  }

  /**
   * The owner publishes a deletion's cleared configs after its commit, possibly before this standby's
   * copies of them arrive. So the standby reads the entities again once the broker has taken its
   * publishes, and corrects what changed meanwhile (a deletion that commits after that read is
   * cleared by the owner after these publishes), until a read finds nothing new.
   */
  private async publishDiscoveryFromStandby(): Promise<number> {
    const settings = await this.deps.savedSettings();
    if (!settings.enabled || !settings.broker_url) throw conflict('MQTT is not enabled');
    const context = { topics: new Topics(settings.topic_root, this.deps.mothershipId, settings.discovery_prefix, settings.birth_topic), version: VERSION };
    const current = async () => {
      const [persons, zones] = await Promise.all([this.deps.presence.listPersons(), this.deps.presence.listZones()]);
      return new Map(discoveryInForm(context, settings.discovery_mode, persons, zones).map((message) => [message.topic, payloadText(message)]));
    };
    let published = await current();
    const client = connectBroker(clientOptions(settings, this.oneOffClientId('discovery')));
    // Only the broker's failures are a 502; the database's keep their own answer.
    const atBroker = <T>(work: Promise<T>) =>
      work.catch((error: unknown) => {
        throw unreachable(error);
      });
    try {
      await atBroker(connected(client, ONE_OFF_CONNECT_TIMEOUT_MS));
      let changes: [topic: string, payload: string][] = [...published];
      for (let round = 0; changes.length > 0 && round < STANDBY_DISCOVERY_ROUNDS; round++) {
        await atBroker(Promise.all(changes.map(([topic, payload]) => client.publishAsync(topic, payload, RETAINED))));
        const now = await current();
        changes = [
          ...[...published.keys()].filter((topic) => !now.has(topic)).map((topic): [string, string] => [topic, '']),
          ...[...now].filter(([topic, payload]) => published.get(topic) !== payload),
        ];
        published = now;
      }
      return published.size;
    } finally {
      await client.endAsync().catch(() => {});
    }
  }

  private context(): DiscoveryContext {
    return { topics: this.topics!, version: VERSION };
  }

  private get deviceMode(): boolean {
    return this.settings?.discovery_mode === 'device';
  }

  /**
   * Every discovery config in the configured form (`removed`: entities to drop from the device
   * config), remembered as the set a retained config must belong to (not a ghost).
   */
  private discoveryMessages(persons: PersonView[], zones: ZoneView[], removed: DiscoveryMessage[] = []): DiscoveryMessage[] {
    const messages = discoveryInForm(this.context(), this.settings!.discovery_mode, persons, zones, removed);
    this.expectedConfigs = new Set(messages.map((message) => message.topic));
    return messages;
  }

  private async onConnect(connection: MqttConnection): Promise<void> {
    const topics = this.topics!;
    // Commands first: a mode command sent during the full sync is not lost.
    const commands = connection.client.subscribeAsync([topics.haStatus, topics.modeCommand], { qos: 1 });
    this.pending.all = true;
    await this.scheduleFlush();
    // Subscribing to our discovery topics after the sync delivers every retained config: any that is
    // not ours any more (an entity deleted while we were away) is a ghost and gets cleared. So is the
    // retained state of such an entity; the state topics are left again once their retained messages
    // came, or every publish of ours would come back to us.
    await Promise.all([commands, connection.client.subscribeAsync([...topics.discoveryFilters, ...topics.stateFilters], { qos: 1 })]);
    setTimeout(() => void connection.client.unsubscribeAsync(topics.stateFilters).catch(() => {}), STATE_CHECK_MS).unref();
  }

  /** Whether a person or zone still exists; null when the database cannot say (then nothing is cleared). */
  private async exists(entity: 'person' | 'zone', id: string): Promise<boolean | null> {
    try {
      await (entity === 'person' ? this.deps.presence.getPerson(id) : this.deps.presence.getZone(id));
      return true;
    } catch (error) {
      return error instanceof ProblemError && error.code === 'not_found' ? false : null;
    }
  }

  /** Availability, every discovery config, and the current state of every entity. */
  private async fullSync(connection: MqttConnection): Promise<void> {
    await this.publishAvailability(connection, 'online');
    const [persons, zones, fall, mode, health] = await Promise.all([
      this.deps.presence.listPersons(),
      this.deps.presence.listZones(),
      this.deps.presence.fallState(),
      this.deps.presence.mode(),
      this.deps.presence.health(),
    ]);
    const topics = this.topics!;
    const states: StateMessage[] = [
      ...persons.flatMap((person) => personState(topics, person, zones.find((zone) => zone.id === person.zone)?.name ?? null)),
      ...zones.map((zone) => zoneState(topics, zone)),
      [topics.fall, JSON.stringify(fall)],
      [topics.mode, mode],
      [topics.health, JSON.stringify(this.lastHealth ?? { ...health, timestamp: new Date().toISOString() })],
    ];
    await this.publishAll(connection, this.discoveryMessages(persons, zones));
    await Promise.all(states.map(([topic, payload]) => this.publish(connection, topic, payload)));
  }

  /**
   * Leaves what a move from `old` to `next` leaves behind: state under an old root and configs under
   * an old prefix are cleared. A switch of discovery mode under the same prefix follows Home
   * Assistant's migration: the old form's configs get `{"migrate_discovery": true}`, which unloads
   * their entities without deleting them, so the new form (published next, with the same discovery
   * ids and unique_ids) takes them over, history and entity ids kept; the new connection then clears
   * the old topics as ghosts.
   */
  private async leave(connection: MqttConnection, old: { topics: Topics; mode: DiscoveryMode }, next: { topics: Topics; mode: DiscoveryMode }): Promise<void> {
    const [persons, zones] = await Promise.all([this.deps.presence.listPersons(), this.deps.presence.listZones()]);
    const cleared: string[] = [];
    if (old.topics.base !== next.topics.base) {
      cleared.push(old.topics.availability, old.topics.fall, old.topics.mode, old.topics.health);
      for (const person of persons) cleared.push(...personState(old.topics, person, null).map(([topic]) => topic));
      for (const zone of zones) cleared.push(zoneState(old.topics, zone)[0]);
    }
    const oldForm = discoveryInForm({ topics: old.topics, version: VERSION }, old.mode, persons, zones).map((message) => message.topic);
    const moved = old.topics.prefix !== next.topics.prefix;
    const migrated = !moved && old.mode !== next.mode ? oldForm : [];
    if (moved) cleared.push(...oldForm);
    await Promise.all([
      ...cleared.map((topic) => this.publish(connection, topic, '')),
      ...migrated.map((topic) => this.publish(connection, topic, MIGRATE_DISCOVERY)),
    ]);
  }

  private publishAvailability(connection: MqttConnection, state: 'online' | 'offline'): Promise<void> {
    return this.publish(connection, this.topics!.availability, state);
  }

  private async publishAll(connection: MqttConnection, messages: DiscoveryMessage[]): Promise<void> {
    await Promise.all(messages.map((message) => this.publish(connection, message.topic, payloadText(message))));
  }

  private async publish(connection: MqttConnection, topic: string, payload: string, options: { qos: 0 | 1; retain: boolean } = RETAINED): Promise<void> {
    if (!connection.client.connected) return;
    await connection.client.publishAsync(topic, payload, options);
    this.deps.metrics?.mqttPublishes.inc();
  }

  private async onMessage(topic: string, payload: string, retained: boolean): Promise<void> {
    const topics = this.topics;
    const connection = this.connection;
    if (!topics || !connection) return;
    const command = interpretMessage({ topic, payload, retained }, topics, this.expectedConfigs);
    if (!this.inbound.admit(topic, payload, command)) return;
    switch (command.kind) {
      case 'full-sync':
        return this.answerBirth();
      case 'set-mode':
        await this.deps.presence.setMode(command.mode, 'mqtt');
        return;
      case 'clear-ghost':
        this.deps.log.info({ topic }, 'clearing a stale discovery config');
        return this.publish(connection, topic, '');
      case 'check-state':
        if ((await this.exists(command.entity, command.id)) !== false) return;
        this.deps.log.info({ topic }, 'clearing the state of a deleted entity');
        return this.publish(connection, topic, '');
    }
  }

  /**
   * Home Assistant restarted and needs every config and state again. As its docs advise, after a
   * random delay, so many devices do not answer at the same moment; births that arrive meanwhile
   * are answered by the same full sync.
   */
  private answerBirth(): void {
    if (this.birthTimer) return;
    this.birthTimer = setTimeout(() => {
      this.birthTimer = null;
      this.pending.all = true;
      void this.scheduleFlush();
    }, Math.random() * this.deps.birthDelayMaxMs);
    this.birthTimer.unref();
  }

  private onEvent(event: StoredEvent): void {
    const connection = this.connection;
    const topics = this.topics;
    if (!connection || !topics) return;
    const { payload } = event;
    if (payload.event_type === 'system.health') {
      this.lastHealth = { ...payload.detail, timestamp: payload.timestamp };
      void this.publish(connection, topics.health, JSON.stringify(this.lastHealth)).catch(() => {});
    } else if (payload.event_type === 'anomaly.detected') {
      void this.publish(connection, topics.anomaly, event.json, { qos: 1, retain: false }).catch(() => {});
    } else if (recordChange(this.pending, payload, this.context())) {
      void this.scheduleFlush();
    }
  }

  /**
   * The one path by which state reaches the broker: one flush at a time, each reading the current
   * state from the database, until nothing is pending. A full sync goes through it too, so it can
   * never publish an older reading after a newer one. Every flush ends: publishes fail when the
   * connection closes, and a flush is abandoned after FLUSH_TIMEOUT_MS.
   */
  private scheduleFlush(): Promise<void> {
    this.flushing ??= (async () => {
      await new Promise((resolve) => setImmediate(resolve)); // gather the changes of one burst
      while (hasWork(this.pending)) {
        const work = this.pending;
        this.pending = emptyPending();
        let timer: NodeJS.Timeout | undefined;
        const timeout = new Promise<never>((_resolve, reject) => {
          timer = setTimeout(() => reject(new Error(`no acknowledgement from the broker within ${FLUSH_TIMEOUT_MS} ms`)), FLUSH_TIMEOUT_MS);
        });
        await Promise.race([this.flush(work), timeout])
          .catch((error: Error) => this.deps.log.warn({ err: error }, 'MQTT state publish failed'))
          .finally(() => clearTimeout(timer));
      }
    })().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  /** Publishes the current state of everything in `work`, read from the database (always current). */
  private async flush(work: Pending): Promise<void> {
    const connection = this.connection;
    const topics = this.topics;
    if (!connection?.client.connected || !topics) return; // the next connect republishes everything
    const { presence } = this.deps;
    const publishes: Promise<void>[] = [];
    const send = (topic: string, payload: string) => publishes.push(this.publish(connection, topic, payload));
    const sendConfigs = (configs: DiscoveryMessage[]) => {
      for (const config of configs) {
        this.expectedConfigs.add(config.topic);
        send(config.topic, JSON.stringify(config.payload));
      }
    };

    const deviceMode = this.deviceMode;
    if (deviceMode && (work.removed.length > 0 || work.configs.persons.size > 0 || work.configs.zones.size > 0)) {
      // One config holds every entity: any entity added, renamed or removed republishes it.
      const [persons, zones] = await Promise.all([presence.listPersons(), presence.listZones()]);
      for (const message of this.discoveryMessages(persons, zones, work.removed)) send(message.topic, JSON.stringify(message.payload));
    }
    for (const message of deviceMode ? [] : work.removed) {
      this.expectedConfigs.delete(message.topic);
      send(message.topic, '');
    }
    for (const topic of work.clearTopics) send(topic, '');
    for (const id of work.persons) {
      const person = await presence.getPerson(id).catch(() => null);
      if (!person) continue;
      if (work.configs.persons.has(id) && !deviceMode) sendConfigs(personConfigs(this.context(), person));
      const zoneName = person.zone ? ((await presence.getZone(person.zone).catch(() => null))?.name ?? null) : null;
      for (const [topic, payload] of personState(topics, person, zoneName)) send(topic, payload);
    }
    for (const id of work.zones) {
      const zone = await presence.getZone(id).catch(() => null);
      if (!zone) continue;
      if (work.configs.zones.has(id)) {
        if (!deviceMode) sendConfigs(zoneConfigs(this.context(), zone));
        // A renamed zone: its occupants' trackers show the new name.
        for (const occupant of zone.occupants) send(topics.personTracker(occupant), zone.name);
      }
      send(...zoneState(topics, zone));
    }
    if (work.fall) send(topics.fall, JSON.stringify(await presence.fallState()));
    if (work.mode) send(topics.mode, await presence.mode());
    await Promise.all(publishes);
    if (work.all) await this.fullSync(connection);
  }
}

/** The broker of a short-lived connection could not be reached (502, with the reason). */
function unreachable(error: unknown): ProblemError {
  return new ProblemError('bad_gateway', `Could not reach the broker: ${describeMqttError(error as Error & { code?: string | number })}`);
}
