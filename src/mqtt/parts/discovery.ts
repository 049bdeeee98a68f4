import { conflict } from '../../errors.js';
import { VERSION } from '../../version.js';
import { unreachable } from '../cleanup.js';
import { interpretMessage } from '../commands.js';
import { clientOptions, connectBroker, connected, type MqttConnection, ONE_OFF_CONNECT_TIMEOUT_MS } from '../connection.js';
import { discoveryInForm, payloadText } from '../discovery.js';
import { refusalCode } from '../refusals.js';
import { Topics } from '../topics.js';
import type { ConnectionPart } from './connection.js';
import type { MqttDependencies, MqttPart } from './part.js';
import { RETAINED, type SyncPart } from './sync.js';

/** Publish Discovery on a standby corrects what changed while it published at most this often. */
const STANDBY_DISCOVERY_ROUNDS = 5;

export interface DiscoveryAnswer {
  /** Configs the broker accepted. */
  published: number;
  /** Configs the broker refused (MQTT 5 only). */
  refused: number;
}

/**
 * The discovery part: watches the service's own discovery topics while connected (a config there
 * that is not what the record says, a fake or a ghost, is corrected), and republishes every config
 * on request (Publish Discovery), from a short-lived client on a standby.
 */
export class DiscoveryPart implements MqttPart {
  constructor(
    private readonly link: ConnectionPart,
    private readonly sync: SyncPart,
    private readonly deps: MqttDependencies,
    /** A config that is not ours showed up: others may have been dropped by the broker's queue. */
    private readonly onForeign: () => void,
  ) {}

  async start(): Promise<void> {
    this.link.events.on('message', this.onMessage);
  }

  async stop(): Promise<void> {
    this.link.events.off('message', this.onMessage);
  }

  /**
   * Subscribes to our discovery topics on a new connection, once the record is loaded. At QoS 1: at
   * QoS 0 a broker with more retained configs there than it queues for a client (Mosquitto's
   * max_queued_messages) drops the excess and our PUBACKs with it, and a publish whose PUBACK is
   * lost holds the one writer for as long as the connection lasts.
   */
  watch(connection: MqttConnection): Promise<string[]> {
    return connection.subscribe(this.link.topics!.discoveryFilters);
  }

  private readonly onMessage = (topic: string, payload: string, retained: boolean): void => {
    const topics = this.link.topics;
    if (!topics || !this.link.connection || interpretMessage({ topic, payload, retained }, topics).kind !== 'check-config') return;
    // Our own publishes come back too: only what the broker should not hold by the record counts.
    if (this.sync.holds(topic, payload)) return;
    // Any client of the broker can publish these: a line a minute, however many.
    this.deps.throttledLog.write(this.deps.log, 'mqtt:foreign-config', 'info', { topic }, 'a discovery config that is not ours: correcting it');
    this.sync.doubt(topic);
    void this.sync.requestFullSync({ forceConfigs: false });
    this.onForeign();
  };

  /**
   * Republishes every discovery config (Publish Discovery); 409 when not connected. On a standby
   * (another instance owns the connection), from a short-lived client of its own, as the cleanup
   * does: the configs are the owner's, read from the same database.
   */
  async publishDiscovery(): Promise<DiscoveryAnswer> {
    if (this.deps.ownership?.status().role === 'standby') return this.publishFromStandby();
    const connection = this.link.connection;
    if (!connection?.client.connected) throw conflict('MQTT is not connected');
    // Through the one writer, so it cannot publish an older config after a newer one.
    await this.sync.requestFullSync({ forceConfigs: true });
    if (!connection.client.connected) throw conflict('MQTT connection lost while publishing');
    const [persons, zones] = await Promise.all([this.deps.presence.listPersons(), this.deps.presence.listZones()]);
    const configs = this.sync.discoveryMessages(persons, zones).map((message) => message.topic);
    const refused = configs.filter((topic) => this.sync.refused(topic)).length;
    return { published: configs.length - refused, refused };
  }

  /**
   * The owner publishes a deletion's cleared configs after its commit, possibly before this standby's
   * copies of them arrive. So the standby reads the entities again once the broker has taken its
   * publishes, and corrects what changed meanwhile (a deletion that commits after that read is
   * cleared by the owner after these publishes), until a read finds nothing new.
   */
  private async publishFromStandby(): Promise<DiscoveryAnswer> {
    const settings = await this.deps.savedSettings();
    if (!settings.enabled || !settings.broker_url) throw conflict('MQTT is not enabled');
    const context = { topics: new Topics(settings.topic_root, this.deps.mothershipId, settings.discovery_prefix, settings.birth_topic), version: VERSION };
    const current = async () => {
      const [persons, zones] = await Promise.all([this.deps.presence.listPersons(), this.deps.presence.listZones()]);
      return new Map(discoveryInForm(context, settings.discovery_mode, persons, zones).map((message) => [message.topic, payloadText(message)]));
    };
    let published = await current();
    const client = await connectBroker(clientOptions(settings, this.link.oneOffClientId('discovery')));
    // Only the broker's failures are a 502; the database's keep their own answer.
    const atBroker = <T>(work: Promise<T>) =>
      work.catch((error: unknown) => {
        throw unreachable(error);
      });
    const refused = new Set<string>();
    // A refusal (MQTT 5) is counted, not a failure: the broker answered.
    const publish = ([topic, payload]: [string, string]) =>
      client.publishAsync(topic, payload, RETAINED).then(
        () => refused.delete(topic),
        (error: unknown) => {
          if (refusalCode(error) === null) throw error;
          refused.add(topic);
        },
      );
    try {
      await atBroker(connected(client, ONE_OFF_CONNECT_TIMEOUT_MS));
      let changes: [topic: string, payload: string][] = [...published];
      for (let round = 0; changes.length > 0 && round < STANDBY_DISCOVERY_ROUNDS; round++) {
        await atBroker(Promise.all(changes.map(publish)));
        const now = await current();
        changes = [
          ...[...published.keys()].filter((topic) => !now.has(topic)).map((topic): [string, string] => [topic, '']),
          ...[...now].filter(([topic, payload]) => published.get(topic) !== payload),
        ];
        published = now;
      }
      const refusedNow = [...refused].filter((topic) => published.has(topic)).length;
      return { published: published.size - refusedNow, refused: refusedNow };
    } finally {
      await client.endAsync().catch(() => {});
    }
  }
}
