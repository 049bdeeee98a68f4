import type { FastifyBaseLogger } from 'fastify';
import type { MqttStatus } from './connection.js';

export type LoggedStatus = { connected: boolean; error: string | null; nextAttempt: string | null; conflict: boolean };

export const NOTHING_LOGGED: LoggedStatus = { connected: false, error: null, nextAttempt: null, conflict: false };

/**
 * Says in the server log when the broker connection comes, goes or fails, with the reason and the
 * next attempt. A new reconnect time means a connection just closed; a failure that repeats on every
 * reconnect is logged once, until its reason changes. A contested client id is said once when it
 * starts and once when it ends, not at each attempt in between.
 */
export function logConnectionChange(log: FastifyBaseLogger, before: LoggedStatus, status: MqttStatus): LoggedStatus {
  const reason = status.last_error;
  const next = { connected: status.connected, error: before.error, nextAttempt: status.next_reconnect_at, conflict: status.client_id_conflict };
  if (status.client_id_conflict !== before.conflict) {
    if (status.client_id_conflict) log.warn({ next_attempt_at: status.next_reconnect_at }, `MQTT: ${reason}`);
    else log.info('MQTT: the client id is ours again (the connection held); reconnecting as usual');
  }
  if (status.client_id_conflict) return next;
  if (status.connected) {
    if (!before.connected) log.info('MQTT connected');
    return { ...next, error: null };
  }
  if (!status.next_reconnect_at || status.next_reconnect_at === before.nextAttempt) return next;
  const retry = { reason: reason ?? 'closed by the broker', next_attempt_at: status.next_reconnect_at };
  if (before.connected) log.warn(retry, `MQTT connection lost: ${retry.reason}`);
  else if (reason !== before.error) log.warn(retry, `MQTT connection failed: ${retry.reason}`);
  return { ...next, error: reason };
}
