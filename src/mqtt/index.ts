import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { MqttClient } from 'mqtt';
import type { Database } from '../db/index.js';
import { tailLog, type EventDetails, type EventLog, type StoredEvent } from '../events/index.js';
import { conflict, DomainError, invalid } from '../errors.js';
import type { ThrottledLog } from '../http/index.js';
import type { Metrics } from '../ops/index.js';
import type { PersonView, PresenceService, ZoneView } from '../presence/index.js';
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
import { matchesRecord, planPublish } from './plan.js';
import { RetainedPublisher } from './publisher.js';
import { RetainedRecord } from './record.js';
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
export { cleanupRefusal, clearInstallation } from './cleanup.js';
export { describeMqttError } from './connection.js';

const RETAINED = { qos: 1 as const, retain: true };
/** Home Assistant's hand-over signal between the two discovery forms (mqtt/discovery.py). */
const MIGRATE_DISCOVERY = JSON.stringify({ migrate_discovery: true });
type DiscoveryMode = IntegrationSettings['mqtt']['discovery_mode'];
/** How long stop() lets the last flush finish before it closes the connection anyway. */
const STOP_GRACE_MS = 2000;
/**
 * How often the log is read for events other processes appended (other instances, a standalone
 * worker): their changes reach the broker within this; this process's own at once.
 */
const FOLLOW_POLL_MS = 250;
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
  private readonly record: RetainedRecord;
  /** The one writer of retained state: the full sync and every change go through it, one flush at a time. */
  private readonly publisher: RetainedPublisher;
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
      /** For what can repeat every FOLLOW_POLL_MS (the database away). */
      throttledLog: ThrottledLog;
    },
  ) {
    this.record = new RetainedRecord(deps.database);
    this.publisher = new RetainedPublisher(this.record, () => deps.metrics?.mqttPublishes.inc());
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
    // Through the one writer, so it cannot publish an older config after a newer one.
    Object.assign(this.pending, { all: true, forceConfigs: true });
    await this.scheduleFlush();
    if (!connection.client.connected) throw conflict('MQTT connection lost while publishing');
    const [persons, zones] = await Promise.all([this.deps.presence.listPersons(), this.deps.presence.listZones()]);
    return this.discoveryMessages(persons, zones).length;
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

  /** Every discovery config in the configured form (`removed`: entities to drop from the device config). */
  private discoveryMessages(persons: PersonView[], zones: ZoneView[], removed: DiscoveryMessage[] = []): DiscoveryMessage[] {
    return discoveryInForm(this.context(), this.settings!.discovery_mode, persons, zones, removed);
  }

  private async onConnect(connection: MqttConnection): Promise<void> {
    const topics = this.topics!;
    const { client } = connection;
    // Commands first: a mode command sent during the full sync is not lost.
    const commands = client.subscribeAsync([topics.haStatus, topics.modeCommand], { qos: 1 });
    await this.loadRecord(client, topics);
    // Our discovery topics, for as long as we are connected: a config there that is not what we
    // published (a ghost left by someone else, a fake) is corrected. At QoS 1: at QoS 0 a broker
    // with more retained configs there than it queues for a client (Mosquitto's max_queued_messages)
    // drops the excess and our PUBACKs with it, and a publish whose PUBACK is lost holds the one
    // writer for as long as the connection lasts.
    await Promise.all([commands, client.subscribeAsync(topics.discoveryFilters, { qos: 1 })]);
    this.pending.all = true;
    await this.scheduleFlush();
  }

  /**
   * Loads the record of what the broker holds. It holds there only while the broker still has the
   * generation marker written when the record was last trusted: otherwise (a broker that lost its
   * retained messages, another broker) every recorded topic is in doubt and gets published again,
   * and the marker of a new generation says so from now on.
   */
  private async loadRecord(client: MqttClient, topics: Topics): Promise<void> {
    const [, generation, marker] = await Promise.all([this.publisher.load(), this.record.generation(), readRetained(client, topics.generation)]);
    if (generation !== null && marker === generation) return;
    const next = await this.record.forgetContents();
    for (const topic of this.publisher.held.keys()) this.publisher.held.set(topic, null);
    await client.publishAsync(topics.generation, next, RETAINED);
  }

  /**
   * Availability, then every discovery config and state the broker does not hold already (all of
   * them where the record is in doubt), then clears of what the record holds and should not exist.
   */
  private async fullSync(connection: MqttConnection, work: Pending): Promise<void> {
    await this.publishAvailability(connection, 'online');
    const [persons, zones, fall, mode, health] = await Promise.all([
      this.deps.presence.listPersons(),
      this.deps.presence.listZones(),
      this.deps.presence.fallState(),
      this.deps.presence.mode(),
      this.deps.presence.health(),
    ]);
    const topics = this.topics!;
    const zoneNames = new Map(zones.map((zone) => [zone.id, zone.name]));
    const configs = this.discoveryMessages(persons, zones, work.removed).map((message): StateMessage => [message.topic, payloadText(message)]);
    const states: StateMessage[] = [
      ...persons.flatMap((person) => personState(topics, person, person.zone ? (zoneNames.get(person.zone) ?? null) : null)),
      ...zones.map((zone) => zoneState(topics, zone)),
      [topics.fall, JSON.stringify(fall)],
      [topics.mode, mode],
      [topics.health, JSON.stringify(this.lastHealth ?? { ...health, timestamp: new Date().toISOString() })],
    ];
    const force = work.forceConfigs ? new Set(configs.map(([topic]) => topic)) : undefined;
    await this.publisher.send(
      connection.client,
      planPublish([...this.clears(work), ...configs, ...states], this.publisher.held, { clearUnexpected: true, force }),
    );
  }

  /** The explicit clears of a change: deleted entities' configs (per-entity form) and state. */
  private clears(work: Pending): StateMessage[] {
    const removed = this.deviceMode ? [] : work.removed.map((message) => message.topic);
    return [...removed, ...work.clearTopics].map((topic): StateMessage => [topic, '']);
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
      cleared.push(old.topics.availability, old.topics.generation, old.topics.fall, old.topics.mode, old.topics.health);
      for (const person of persons) cleared.push(...personState(old.topics, person, null).map(([topic]) => topic));
      for (const zone of zones) cleared.push(zoneState(old.topics, zone)[0]);
    }
    const oldForm = discoveryInForm({ topics: old.topics, version: VERSION }, old.mode, persons, zones).map((message) => message.topic);
    const moved = old.topics.prefix !== next.topics.prefix;
    const migrated = !moved && old.mode !== next.mode ? oldForm : [];
    if (moved) cleared.push(...oldForm);
    // Through the record: what does not finish before the close is cleared by the next full sync.
    const messages = [...cleared.map((topic): StateMessage => [topic, '']), ...migrated.map((topic): StateMessage => [topic, MIGRATE_DISCOVERY])];
    await this.publisher.send(connection.client, planPublish(messages, this.publisher.held));
  }

  private publishAvailability(connection: MqttConnection, state: 'online' | 'offline'): Promise<void> {
    return this.publish(connection, this.topics!.availability, state);
  }

  /** A message outside the record: availability (the Last Will changes it behind our back), anomalies (not retained). */
  private async publish(connection: MqttConnection, topic: string, payload: string, options: { qos: 0 | 1; retain: boolean } = RETAINED): Promise<void> {
    if (!connection.client.connected) return;
    await connection.client.publishAsync(topic, payload, options);
    this.deps.metrics?.mqttPublishes.inc();
  }

  private async onMessage(topic: string, payload: string, retained: boolean): Promise<void> {
    const topics = this.topics;
    const connection = this.connection;
    if (!topics || !connection) return;
    const command = interpretMessage({ topic, payload, retained }, topics);
    if (!this.inbound.admit(topic, payload, command)) return;
    switch (command.kind) {
      case 'full-sync':
        return this.answerBirth();
      case 'set-mode':
        await this.deps.presence.setMode(command.mode, 'mqtt');
        return;
      case 'check-config':
        // Our own publishes come back too: only what the broker should not hold by the record counts.
        if (matchesRecord(this.publisher.held, topic, payload)) return;
        // Any client of the broker can publish these: a line a minute, however many.
        this.deps.throttledLog.write(this.deps.log, 'mqtt:foreign-config', 'info', { topic }, 'a discovery config that is not ours: correcting it');
        this.publisher.held.set(topic, null);
        this.pending.all = true;
        void this.scheduleFlush();
        return;
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
      Object.assign(this.pending, { all: true, forceConfigs: true });
      void this.scheduleFlush();
    }, Math.random() * this.deps.birthDelayMaxMs);
    this.birthTimer.unref();
  }

  private onEvent(event: StoredEvent): void {
    const connection = this.connection;
    const topics = this.topics;
    if (!connection || !topics) return;
    const { payload } = event;
    if (payload.event_type === 'system.health') this.lastHealth = { ...payload.detail, timestamp: payload.timestamp };
    if (payload.event_type === 'anomaly.detected') {
      void this.publish(connection, topics.anomaly, event.json, { qos: 1, retain: false }).catch(() => {});
    } else if (recordChange(this.pending, payload, this.context())) {
      void this.scheduleFlush();
    }
  }

  /**
   * The one path by which retained state reaches the broker: one flush at a time, each reading the
   * current state from the database, until nothing is pending. A full sync goes through it too, so
   * nothing older is ever published after something newer, however long a sync takes. A flush ends
   * when the broker has acknowledged its publishes or the connection closed (which fails them).
   */
  private scheduleFlush(): Promise<void> {
    this.flushing ??= (async () => {
      await new Promise((resolve) => setImmediate(resolve)); // gather the changes of one burst
      while (hasWork(this.pending)) {
        const work = this.pending;
        this.pending = emptyPending();
        await this.flush(work).catch((error: Error) => this.deps.log.warn({ err: error }, 'MQTT state publish failed'));
      }
    })().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  /** Publishes the current state of everything in `work`, read from the database now, where the broker does not hold it already. */
  private async flush(work: Pending): Promise<void> {
    const connection = this.connection;
    const topics = this.topics;
    if (!connection?.client.connected || !topics) return; // the next connect republishes everything
    if (work.all) return this.fullSync(connection, work);
    const { presence } = this.deps;
    const deviceMode = this.deviceMode;
    const messages = this.clears(work);
    const addConfigs = (configs: DiscoveryMessage[]) => {
      if (!deviceMode) for (const config of configs) messages.push([config.topic, payloadText(config)]);
    };
    if (deviceMode && (work.removed.length > 0 || work.configs.persons.size > 0 || work.configs.zones.size > 0)) {
      // One config holds every entity: any entity added, renamed or removed republishes it.
      const [persons, zones] = await Promise.all([presence.listPersons(), presence.listZones()]);
      for (const message of this.discoveryMessages(persons, zones, work.removed)) messages.push([message.topic, payloadText(message)]);
    }
    const persons = new Set(work.persons);
    for (const id of work.zones) {
      const zone = await presence.getZone(id).catch(() => null);
      if (!zone) continue;
      if (work.configs.zones.has(id)) {
        addConfigs(zoneConfigs(this.context(), zone));
        // A renamed zone: its occupants' room follows.
        for (const occupant of zone.occupants) persons.add(occupant);
      }
      messages.push(zoneState(topics, zone));
    }
    for (const id of persons) {
      const person = await presence.getPerson(id).catch(() => null);
      if (!person) continue;
      if (work.configs.persons.has(id)) addConfigs(personConfigs(this.context(), person));
      const zoneName = person.zone ? ((await presence.getZone(person.zone).catch(() => null))?.name ?? null) : null;
      messages.push(...personState(topics, person, zoneName));
    }
    if (work.fall) messages.push([topics.fall, JSON.stringify(await presence.fallState())]);
    if (work.mode) messages.push([topics.mode, await presence.mode()]);
    if (work.health && this.lastHealth) messages.push([topics.health, JSON.stringify(this.lastHealth)]);
    await this.publisher.send(connection.client, planPublish(messages, this.publisher.held));
  }
}

/**
 * The retained payload of `topic` on the broker, null when there is none. A probe published after
 * subscribing comes back after the retained message (the broker queues both to us in order), so
 * its arrival says the retained message, if any, has come.
 */
async function readRetained(client: MqttClient, topic: string): Promise<string | null> {
  const probe = `${topic}/probe`;
  const nonce = randomUUID();
  let retained: string | null = null;
  let onMessage: (messageTopic: string, payload: Buffer, packet: { retain: boolean }) => void = () => {};
  let onClose = () => {};
  try {
    return await new Promise<string | null>((resolve, reject) => {
      onMessage = (messageTopic, payload, packet) => {
        if (messageTopic === topic && packet.retain && payload.length > 0) retained = payload.toString('utf8');
        else if (messageTopic === probe && payload.toString('utf8') === nonce) resolve(retained);
      };
      onClose = () => reject(new Error('MQTT connection closed while reading the generation marker'));
      client.on('message', onMessage).once('close', onClose);
      client
        .subscribeAsync(`${topic}/#`, { qos: 1 })
        .then(() => client.publishAsync(probe, nonce, { qos: 1 }))
        .catch(reject);
    });
  } finally {
    client.off('message', onMessage).off('close', onClose);
    void client.unsubscribeAsync(`${topic}/#`).catch(() => {});
  }
}

/** The broker of a short-lived connection could not be reached (`bad_gateway`, with the reason). */
function unreachable(error: unknown): DomainError {
  return new DomainError('bad_gateway', `Could not reach the broker: ${describeMqttError(error as Error & { code?: string | number })}`);
}
