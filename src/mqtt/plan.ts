import { payloadHash, type Held } from './record.js';
import type { StateMessage } from './state.js';

/** A retained message to send, with the hash the record keeps for it (null: a clear). */
export type Outgoing = [topic: string, payload: string, hash: string | null];

/**
 * What to send so the broker holds `expected` (pure): each message whose payload the broker does not
 * hold already (by the record `held`; `force` sends some regardless), every clear (an empty payload,
 * since the record cannot know what someone else left there), and with `clearUnexpected` a clear
 * of every recorded topic that should no longer exist, last, after what replaces it.
 */
export function planPublish(expected: Iterable<StateMessage>, held: ReadonlyMap<string, string | null>, options: PlanOptions = {}): Outgoing[] {
  return [...eachToPublish(expected, held, options)];
}

export interface PlanOptions {
  clearUnexpected?: boolean;
  force?: Pick<ReadonlySet<string>, 'has'>;
}

/**
 * planPublish one message at a time, as the publisher takes them: a full sync holds one step of
 * messages, not all of them. The unexpected clears are the topics `held` recorded at the start, so
 * what the publisher records meanwhile changes nothing.
 */
export function* eachToPublish(expected: Iterable<StateMessage>, held: ReadonlyMap<string, string | null>, options: PlanOptions = {}): Generator<Outgoing> {
  // The recorded topics not expected (not a set of every expected topic, which would keep all of
  // them until the end).
  const unexpected = options.clearUnexpected ? new Set(held.keys()) : null;
  for (const [topic, payload] of expected) {
    unexpected?.delete(topic);
    if (payload === '') {
      yield [topic, '', null];
      continue;
    }
    const hash = payloadHash(payload);
    if (held.get(topic) !== hash || options.force?.has(topic)) yield [topic, payload, hash];
  }
  if (unexpected) for (const topic of unexpected) yield [topic, '', null];
}

/** Whether a message seen on one of our topics is what the broker holds by the record. */
export function matchesRecord(held: Held, topic: string, payload: string): boolean {
  return payload === '' ? !held.has(topic) : held.get(topic) === payloadHash(payload);
}
