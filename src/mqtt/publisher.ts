import type { MqttClient } from 'mqtt';
import type { Outgoing } from './plan.js';
import type { Held, RetainedRecord } from './record.js';
import { refusalCode, type RefusalKind } from './refusals.js';

/** Where a publisher sends: the client, and where the broker's refusals are counted. */
export interface PublishTarget {
  client: MqttClient;
  refused(kind: RefusalKind, topic: string, code: number): void;
}

/** Publishes unacknowledged at once at most: enough to keep a LAN broker busy, bounded in memory. */
const WINDOW = 200;
/** Messages per step: the record is written once before (in doubt) and once after (acknowledged). */
export const STEP = 2000;

/**
 * Sends retained messages in order, keeping the record of what the broker holds. `held` (in memory)
 * changes when a message is sent, so a message that comes back on a subscription can be told from a
 * stranger's; the table changes around the broker's acknowledgements: a topic is marked in doubt
 * before it is sent and gets its hash (or leaves the record, for a clear) once acknowledged. At most
 * WINDOW publishes wait for an acknowledgement: no timeout, since a publish ends either acknowledged
 * or failed when its connection closes. A publish the broker refuses (MQTT 5) stays in doubt, so the
 * next full sync tries it again, and the rest goes on.
 */
export class RetainedPublisher {
  held: Held = new Map();
  /** Topics the broker refused the last time they were sent. */
  readonly refused = new Set<string>();
  /** Sets that collect every topic sent while they are here (what a read-back must not judge by an older record). */
  readonly watchers = new Set<Set<string>>();

  constructor(
    private readonly record: RetainedRecord,
    private readonly onAcknowledged: () => void,
  ) {}

  async load(): Promise<void> {
    this.held = await this.record.load();
  }

  /**
   * Sends `messages` on `client`, taking one step of them at a time (a full sync builds each as it
   * is taken); throws when the connection is lost (the next connect resyncs).
   */
  async send(target: PublishTarget, messages: Iterable<Outgoing>): Promise<void> {
    let step: Outgoing[] = [];
    for (const message of messages) {
      step.push(message);
      if (step.length < STEP) continue;
      await this.step(target, step);
      step = [];
    }
    if (step.length > 0) await this.step(target, step);
  }

  private async step(target: PublishTarget, messages: readonly Outgoing[]): Promise<void> {
    const { client } = target;
    await this.record.write(messages.filter(([, , hash]) => hash !== null).map(([topic]): [string, null] => [topic, null]));
    const acknowledged: [string, string][] = [];
    const cleared: string[] = [];
    const inDoubt: [string, null][] = [];
    let failure: Error | null = null;
    let inFlight = 0;
    let wake: (() => void) | null = null;
    const settled = () => new Promise<void>((resolve) => (wake = resolve));
    for (const [topic, payload, hash] of messages) {
      while (inFlight >= WINDOW) await settled();
      if (failure) break;
      if (!client.connected) {
        failure = new Error('MQTT connection lost while publishing');
        break;
      }
      if (hash === null) this.held.delete(topic);
      else this.held.set(topic, hash);
      for (const watcher of this.watchers) watcher.add(topic);
      inFlight++;
      client.publish(topic, payload, { qos: 1, retain: true }, (error) => {
        inFlight--;
        const refusal = refusalCode(error);
        if (error) {
          if (refusal === null) failure ??= error;
          else {
            this.refused.add(topic);
            target.refused('publish', topic, refusal);
          }
          // The broker may or may not have it: a failed clear stays recorded, in doubt.
          this.held.set(topic, null);
          if (hash === null) inDoubt.push([topic, null]);
        } else {
          this.refused.delete(topic);
          if (hash === null) cleared.push(topic);
          else acknowledged.push([topic, hash]);
          this.onAcknowledged();
        }
        wake?.();
      });
    }
    while (inFlight > 0) await settled();
    await this.record.write([...acknowledged, ...inDoubt], cleared);
    if (failure) throw failure;
  }
}
