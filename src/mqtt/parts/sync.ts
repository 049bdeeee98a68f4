import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { tailLog, type EventDetails, type StoredEvent, type Tail } from '../../events/index.js';
import type { PersonView, ZoneView } from '../../presence/index.js';
import type { MqttConnection } from '../connection.js';
import { discoveryInForm, eachDiscoveryInForm, payloadText, personConfigs, zoneConfigs, type DiscoveryMessage } from '../discovery.js';
import { emptyPending, hasWork, recordChange, type Pending } from '../pending.js';
import { eachToPublish, matchesRecord, planPublish } from '../plan.js';
import { RetainedPublisher } from '../publisher.js';
import { RetainedRecord } from '../record.js';
import { refusalCode } from '../refusals.js';
import { personState, zoneState, type StateMessage } from '../state.js';
import type { Topics } from '../topics.js';
import type { ConnectionPart } from './connection.js';
import type { MqttDependencies, MqttPart } from './part.js';

export const RETAINED = { qos: 1 as const, retain: true };
/** How long stop() lets the changes already made reach the broker before the connection closes anyway. */
const STOP_GRACE_MS = 2000;
/**
 * How often the log is read for events other processes appended (other instances, a standalone
 * worker): their changes reach the broker within this; this process's own at once.
 */
const FOLLOW_POLL_MS = 250;

/** What the other parts subscribe on each connection, before and after the record is loaded. */
export interface SyncHooks {
  /** Subscribed first: a command sent during the full sync is not lost. */
  beforeLoad(connection: MqttConnection): Promise<unknown>;
  /** Subscribed once the record is loaded: what comes back is compared with it. */
  afterLoad(connection: MqttConnection): Promise<unknown>;
  /** The connect's full sync is done. */
  afterSync(): void;
}

/**
 * The sync part, the one writer of retained state: follows the event log, and on every connect and
 * change publishes, one flush at a time, what the broker does not hold already, keeping the record
 * of retained topics. It never queues while disconnected: every connect republishes from the database.
 */
export class SyncPart implements MqttPart {
  private pending = emptyPending();
  private flushing: Promise<void> | null = null;
  private readonly record: RetainedRecord;
  private readonly publisher: RetainedPublisher;
  private lastHealth: (EventDetails['system.health'] & { timestamp: string }) | null = null;
  private following: Tail | null = null;
  private running = false;

  constructor(
    private readonly link: ConnectionPart,
    private readonly deps: MqttDependencies,
    private readonly hooks: SyncHooks,
  ) {
    this.record = new RetainedRecord(deps.database);
    this.publisher = new RetainedPublisher(this.record, () => deps.metrics?.mqttPublishes.inc());
  }

  /**
   * Follows the log while MQTT is enabled (an idle service with MQTT off reads nothing). Events from
   * before the start need no replay: every connect publishes the current state.
   */
  async start(): Promise<void> {
    this.running = true;
    this.link.events.on('connected', this.onConnected);
    this.link.events.on('status', this.onStatus);
  }

  /**
   * Publishes the changes already made (a delete answered before the shutdown: its event is
   * committed) within STOP_GRACE_MS, so the `offline` that follows comes after them, then stops
   * following; closing fails whatever the broker has not acknowledged by then. After losing
   * ownership (`offline` false) only the flush under way ends: another instance may be the writer.
   */
  async stop({ offline }: { offline: boolean }): Promise<void> {
    this.link.events.off('connected', this.onConnected);
    this.link.events.off('status', this.onStatus);
    if (!offline) this.running = false;
    const finishing = offline ? this.finishChanges() : this.flushing;
    if (finishing) await Promise.race([finishing, delay(STOP_GRACE_MS, undefined, { ref: false })]);
    this.running = false;
    this.follow(false);
  }

  /** Flushes until every event committed so far is on the broker. */
  private async finishChanges(): Promise<void> {
    await this.following?.catchUp();
    while (hasWork(this.pending) || this.flushing) await this.scheduleFlush();
  }

  private readonly onStatus = (status: { enabled: boolean }, current: boolean): void => {
    if (current) this.follow(status.enabled);
  };

  private follow(following: boolean): void {
    if (!following) {
      this.following?.();
      this.following = null;
      return;
    }
    this.following ??= tailLog(this.deps.events, {
      pollMs: FOLLOW_POLL_MS,
      deliver: (page) => page.forEach((event) => this.onEvent(event)),
      onError: (error) =>
        this.deps.throttledLog.write(this.deps.log, 'mqtt-follow', 'warn', { err: error }, 'MQTT: reading the event log failed; trying again'),
    });
  }

  /** Asks for a full sync (`forceConfigs`: every config even where the broker holds it); resolves when flushed. */
  requestFullSync({ forceConfigs }: { forceConfigs: boolean }): Promise<void> {
    this.pending.all = true;
    if (forceConfigs) this.pending.forceConfigs = true;
    return this.scheduleFlush();
  }

  /** Whether the broker should hold `payload` on `topic` by the record (our own publishes come back). */
  holds(topic: string, payload: string): boolean {
    return matchesRecord(this.publisher.held, topic, payload);
  }

  /** The topics `covered` picks that the broker holds by the record and that are not in `found`. */
  unseen(found: ReadonlySet<string>, covered: (topic: string) => boolean): string[] {
    const unseen: string[] = [];
    for (const [topic, hash] of this.publisher.held) if (hash !== null && covered(topic) && !found.has(topic)) unseen.push(topic);
    return unseen;
  }

  /** A topic the broker holds something else on (or nothing): in doubt, republished by the next full sync. */
  doubt(topic: string): void {
    this.publisher.held.set(topic, null);
  }

  /** Runs `read` and answers which topics were sent meanwhile: a read-back cannot judge those by the record. */
  async sentDuring<T>(read: () => Promise<T>): Promise<[T, Set<string>]> {
    const sent = new Set<string>();
    this.publisher.watchers.add(sent);
    try {
      return [await read(), sent];
    } finally {
      this.publisher.watchers.delete(sent);
    }
  }

  /** Whether the broker refused `topic` the last time it was sent. */
  refused(topic: string): boolean {
    return this.publisher.refused.has(topic);
  }

  /** Sends `messages` where the broker does not hold them already, through the record. */
  send(connection: MqttConnection, messages: StateMessage[]): Promise<void> {
    return this.publisher.send(connection, planPublish(messages, this.publisher.held));
  }

  /** Every discovery config in the configured form (`removed`: entities to drop from the device config). */
  discoveryMessages(persons: PersonView[], zones: ZoneView[], removed: DiscoveryMessage[] = []): DiscoveryMessage[] {
    return discoveryInForm(this.link.context(), this.link.settings!.discovery_mode, persons, zones, removed);
  }

  publishAvailability(connection: MqttConnection, state: 'online' | 'offline'): Promise<void> {
    return this.publish(connection, this.link.topics!.availability, state);
  }

  /**
   * A message outside the record: availability (the Last Will changes it behind our back), the
   * generation marker, anomalies (not retained). A refusal is counted, not thrown.
   */
  private async publish(connection: MqttConnection, topic: string, payload: string, options: { qos: 0 | 1; retain: boolean } = RETAINED): Promise<void> {
    if (!connection.client.connected) return;
    try {
      await connection.client.publishAsync(topic, payload, options);
      this.deps.metrics?.mqttPublishes.inc();
    } catch (error) {
      const code = refusalCode(error);
      if (code === null) throw error;
      connection.refused('publish', topic, code);
    }
  }

  private readonly onConnected = (connection: MqttConnection): void =>
    void this.onConnect(connection).catch((error: Error) => this.deps.log.warn({ err: error }, 'MQTT sync failed'));

  private async onConnect(connection: MqttConnection): Promise<void> {
    // One Promise.all over both: a connection lost while the record loads fails the subscriptions
    // too, and a rejection nothing awaits would end the process.
    await Promise.all([this.hooks.beforeLoad(connection), this.loadRecord(connection, this.link.topics!).then(() => this.hooks.afterLoad(connection))]);
    this.pending.all = true;
    await this.scheduleFlush();
    this.hooks.afterSync();
  }

  /**
   * Loads the record of what the broker holds. It holds there only while the broker still has the
   * generation marker written when the record was last trusted: otherwise (a broker that lost its
   * retained messages, another broker) every recorded topic is in doubt and gets published again,
   * and the marker of a new generation says so from now on.
   */
  private async loadRecord(connection: MqttConnection, topics: Topics): Promise<void> {
    const [, generation, marker] = await Promise.all([this.publisher.load(), this.record.generation(), readRetained(connection, topics.generation)]);
    if (generation !== null && marker === generation) return;
    if (generation !== null && marker === null) connection.brokerRestarted();
    const next = await this.record.forgetContents();
    for (const topic of this.publisher.held.keys()) this.publisher.held.set(topic, null);
    await this.publish(connection, topics.generation, next);
  }

  private onEvent(event: StoredEvent): void {
    const connection = this.link.connection;
    const topics = this.link.topics;
    if (!connection || !topics) return;
    const { payload } = event;
    if (payload.event_type === 'system.health') this.lastHealth = { ...payload.detail, timestamp: payload.timestamp };
    if (payload.event_type === 'anomaly.detected') {
      void this.publish(connection, topics.anomaly, event.json, { qos: 1, retain: false }).catch(() => {});
    } else if (recordChange(this.pending, payload, this.link.context())) {
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

  private async flush(work: Pending): Promise<void> {
    const connection = this.link.connection;
    if (!this.running || !connection?.client.connected || !this.link.topics) return; // the next connect republishes everything
    if (work.all) return this.fullSync(connection, work);
    await this.publisher.send(connection, planPublish(await this.changes(work), this.publisher.held));
  }

  /**
   * Availability, then every discovery config and state the broker does not hold already (all of
   * them where the record is in doubt), then clears of what the record holds and should not exist.
   */
  private async fullSync(connection: MqttConnection, work: Pending): Promise<void> {
    await this.publishAvailability(connection, 'online');
    const { presence } = this.deps;
    const [persons, zones, fall, mode, health] = await Promise.all([
      presence.listPersons(),
      presence.listZones(),
      presence.fallState(),
      presence.mode(),
      presence.health(),
    ]);
    const topics = this.link.topics!;
    const zoneNames = new Map(zones.map((zone) => [zone.id, zone.name]));
    const context = this.link.context();
    const form = this.link.settings!.discovery_mode;
    const clears = this.clears(work);
    const healthState = JSON.stringify(this.lastHealth ?? { ...health, timestamp: new Date().toISOString() });
    // Built as the publisher takes them: thousands of payloads are never all in memory at once.
    function* expected(): Generator<StateMessage> {
      yield* clears;
      yield* eachDiscoveryInForm(context, form, persons, zones, work.removed);
      for (const person of persons) yield* personState(topics, person, person.zone ? (zoneNames.get(person.zone) ?? null) : null);
      for (const zone of zones) yield zoneState(topics, zone);
      yield [topics.fall, JSON.stringify(fall)];
      yield [topics.mode, mode];
      yield [topics.health, healthState];
    }
    const force = work.forceConfigs ? { has: (topic: string) => topics.isDiscovery(topic) } : undefined;
    await this.publisher.send(connection, eachToPublish(expected(), this.publisher.held, { clearUnexpected: true, force }));
  }

  private get deviceMode(): boolean {
    return this.link.settings?.discovery_mode === 'device';
  }

  /** The explicit clears of a change: deleted entities' configs (per-entity form) and state. */
  private clears(work: Pending): StateMessage[] {
    const removed = this.deviceMode ? [] : work.removed.map((message) => message.topic);
    return [...removed, ...work.clearTopics].map((topic): StateMessage => [topic, '']);
  }

  /** The current state of everything in `work`, read from the database now. */
  private async changes(work: Pending): Promise<StateMessage[]> {
    const { presence } = this.deps;
    const topics = this.link.topics!;
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
        addConfigs(zoneConfigs(this.link.context(), zone));
        // A renamed zone: its occupants' room follows.
        for (const occupant of zone.occupants) persons.add(occupant);
      }
      messages.push(zoneState(topics, zone));
    }
    for (const id of persons) {
      const person = await presence.getPerson(id).catch(() => null);
      if (!person) continue;
      if (work.configs.persons.has(id)) addConfigs(personConfigs(this.link.context(), person));
      const zoneName = person.zone ? await presence.zoneName(person.zone).catch(() => null) : null;
      messages.push(...personState(topics, person, zoneName));
    }
    if (work.fall) messages.push([topics.fall, JSON.stringify(await presence.fallState())]);
    if (work.mode) messages.push([topics.mode, await presence.mode()]);
    if (work.health && this.lastHealth) messages.push([topics.health, JSON.stringify(this.lastHealth)]);
    return messages;
  }
}

/**
 * The retained payload of `topic` on the broker, null when there is none or the broker refuses to
 * let us read it. A probe published after subscribing comes back after the retained message (the
 * broker queues both to us in order), so its arrival says the retained message, if any, has come.
 */
async function readRetained(connection: MqttConnection, topic: string): Promise<string | null> {
  const { client } = connection;
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
      // Refused (the broker's ACL), the marker cannot be read: what the record says is in doubt.
      connection
        .subscribe([`${topic}/#`])
        .then(async (refused) => {
          if (refused.length > 0) resolve(null);
          else await client.publishAsync(probe, nonce, { qos: 1 });
        })
        .catch((error: unknown) => {
          const code = refusalCode(error);
          if (code === null) return reject(error);
          connection.refused('publish', probe, code);
          resolve(null);
        });
    });
  } finally {
    client.off('message', onMessage).off('close', onClose);
    void client.unsubscribeAsync(`${topic}/#`).catch(() => {});
  }
}
