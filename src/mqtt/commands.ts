import { MODES, type Mode } from '../presence/index.js';
import type { Topics } from './topics.js';

/** What a message on a subscribed topic asks of the service. */
export type Command =
  | { kind: 'full-sync' } // Home Assistant's birth message: it needs every config and state again
  | { kind: 'set-mode'; mode: Mode }
  | { kind: 'check-config' } // one of our discovery topics: corrected if it is not what we published
  | { kind: 'ignore'; reason?: string };

export function interpretMessage(message: { topic: string; payload: string; retained: boolean }, topics: Topics): Command {
  const { topic, payload, retained } = message;
  if (topic === topics.haStatus) return payload === 'online' ? { kind: 'full-sync' } : { kind: 'ignore' };
  if (topic === topics.modeCommand) {
    // A retained command is stale by the time we see it: it must not flip the mode on every reconnect.
    if (retained) return { kind: 'ignore' };
    return MODES.includes(payload as Mode) ? { kind: 'set-mode', mode: payload as Mode } : { kind: 'ignore', reason: 'unknown mode' };
  }
  return topics.isDiscovery(topic) ? { kind: 'check-config' } : { kind: 'ignore' };
}
