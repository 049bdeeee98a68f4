import { conflict, invalid } from '../../errors.js';
import { VERSION } from '../../version.js';
import { cleanupRefusal, clearInstallation, unreachable } from '../cleanup.js';
import type { MqttConnection } from '../connection.js';
import { discoveryInForm } from '../discovery.js';
import { personStateTopics, zoneState, type StateMessage } from '../state.js';
import { readOurTopics, sweepable } from '../sweep.js';
import type { ConnectionPart, Placement } from './connection.js';
import type { MqttDependencies, MqttPart } from './part.js';
import type { SyncPart } from './sync.js';

/** Home Assistant's hand-over signal between the two discovery forms (mqtt/discovery.py). */
const MIGRATE_DISCOVERY = JSON.stringify({ migrate_discovery: true });

/**
 * The cleanup part: what a move of topics leaves behind, what others left under the service's own
 * topics (the sweep), and what a previous installation id left on the broker. (Ghosts the service
 * published itself are the sync's: the record minus what should exist.)
 */
export class CleanupPart implements MqttPart {
  private sweeping: Promise<void> | null = null;
  private ending = new AbortController();
  private sweepAgain = false;
  private running = false;

  constructor(
    private readonly link: ConnectionPart,
    private readonly sync: SyncPart,
    private readonly deps: MqttDependencies,
  ) {}

  async start(): Promise<void> {
    this.running = true;
    this.ending = new AbortController();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.ending.abort();
    await this.sweeping;
  }

  /**
   * Reads every retained message under our topics (after each connect's sync, and when a config
   * that is not ours shows up), clears what the service did not publish (a flood of fakes larger
   * than the broker queues for the watch, the state topics of an older release) and republishes
   * what the record says the broker holds and it does not. One sweep at a time; asked again
   * meanwhile, one more follows.
   */
  sweepSoon(): void {
    if (!this.running) return;
    if (this.sweeping) {
      this.sweepAgain = true;
      return;
    }
    this.sweeping = (async () => {
      do {
        this.sweepAgain = false;
        await this.sweep();
      } while (this.sweepAgain && this.running);
    })()
      .catch((error: Error) => {
        // Stopped: the read was ended on purpose.
        if (this.running) this.deps.throttledLog.write(this.deps.log, 'mqtt-sweep', 'warn', { err: error }, 'MQTT: reading our retained topics failed');
      })
      .finally(() => {
        this.sweeping = null;
      });
  }

  private async sweep(): Promise<void> {
    const { settings, topics, connection } = this.link;
    if (!settings || !topics || !connection?.client.connected) return;
    const [read, sent] = await this.sync.sentDuring(() =>
      readOurTopics(settings, this.link.oneOffClientId('sweep'), topics, (topic, payload) => this.sync.holds(topic, payload), this.ending.signal),
    );
    // Another connection has its own sweep.
    if (!this.running || this.link.connection !== connection) return;
    // What was sent while reading is newer than what was read.
    const foreign = read.foreign.filter((topic) => !sent.has(topic));
    // A broker restored from an older copy of its retained messages still has the generation marker
    // but not what was published since: what the record says it holds and the read did not find is
    // sent again. A read cut short can only make this republish more, never clear anything.
    const lost = this.sync.unseen(read.ours, (topic) => sweepable(topics, topic) && !sent.has(topic));
    if (foreign.length === 0 && lost.length === 0) return;
    if (foreign.length > 0) this.deps.log.info({ count: foreign.length }, 'MQTT: clearing retained messages under our topics that we did not publish');
    if (lost.length > 0) this.deps.log.info({ count: lost.length }, 'MQTT: republishing retained messages the broker does not hold');
    for (const topic of [...foreign, ...lost]) this.sync.doubt(topic);
    await this.sync.requestFullSync({ forceConfigs: false });
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
      return (await clearInstallation(settings, this.link.oneOffClientId('cleanup'), installation)).cleared;
    } catch (error) {
      throw unreachable(error);
    }
  }

  /**
   * Leaves what a move from `old` to `next` leaves behind: state under an old root and configs under
   * an old prefix are cleared. A switch of discovery mode under the same prefix follows Home
   * Assistant's migration: the old form's configs get `{"migrate_discovery": true}`, which unloads
   * their entities without deleting them, so the new form (published next, with the same discovery
   * ids and unique_ids) takes them over, history and entity ids kept; the new connection then clears
   * the old topics as ghosts.
   */
  async leave(connection: MqttConnection, old: Placement, next: Placement): Promise<void> {
    const [persons, zones] = await Promise.all([this.deps.presence.listPersons(), this.deps.presence.listZones()]);
    const cleared: string[] = [];
    if (old.topics.base !== next.topics.base) {
      cleared.push(old.topics.availability, old.topics.generation, old.topics.fall, old.topics.mode, old.topics.health);
      for (const person of persons) cleared.push(...personStateTopics(old.topics, person.id));
      for (const zone of zones) cleared.push(zoneState(old.topics, zone)[0]);
    }
    const oldForm = discoveryInForm({ topics: old.topics, version: VERSION }, old.mode, persons, zones).map((message) => message.topic);
    const moved = old.topics.prefix !== next.topics.prefix;
    const migrated = !moved && old.mode !== next.mode ? oldForm : [];
    if (moved) cleared.push(...oldForm);
    // Through the record: what does not finish before the close is cleared by the next full sync.
    const messages = [...cleared.map((topic): StateMessage => [topic, '']), ...migrated.map((topic): StateMessage => [topic, MIGRATE_DISCOVERY])];
    await this.sync.send(connection, messages);
  }
}
