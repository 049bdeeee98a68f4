import { MODES, type Mode } from '../presence/service.js';
import type { Topics } from './topics.js';

/** What a message on a subscribed topic asks of the service. */
export type Command =
  | { kind: 'full-sync' } // Home Assistant's birth message: it needs every config and state again
  | { kind: 'set-mode'; mode: Mode }
  | { kind: 'clear-ghost' } // a retained config of this installation for an entity that no longer exists
  | { kind: 'check-state'; entity: 'person' | 'zone'; id: string } // a retained state: cleared if its entity no longer exists
  | { kind: 'ignore'; reason?: string };

export function interpretMessage(
  message: { topic: string; payload: string; retained: boolean },
  topics: Topics,
  expectedConfigs: ReadonlySet<string>,
): Command {
  const { topic, payload, retained } = message;
  if (topic === topics.haStatus) return payload === 'online' ? { kind: 'full-sync' } : { kind: 'ignore' };
  if (topic === topics.modeCommand) {
    // A retained command is stale by the time we see it: it must not flip the mode on every reconnect.
    if (retained) return { kind: 'ignore' };
    return MODES.includes(payload as Mode) ? { kind: 'set-mode', mode: payload as Mode } : { kind: 'ignore', reason: 'unknown mode' };
  }
  const state = topics.entityOfState(topic);
  if (state) return retained && payload !== '' ? { kind: 'check-state', entity: state.kind, id: state.id } : { kind: 'ignore' };
  if (retained && payload !== '' && !expectedConfigs.has(topic)) return { kind: 'clear-ghost' };
  return { kind: 'ignore' };
}
