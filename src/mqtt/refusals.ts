import type { FastifyBaseLogger } from 'fastify';
import type { ThrottledLog } from '../http/index.js';
import type { Metrics } from '../ops/index.js';
import { loadedMqtt } from './library.js';

export type RefusalKind = 'publish' | 'subscribe';

/** A publish or subscription the broker refused (its ACL, a quota): what the status shows last. */
export interface Refusal {
  kind: RefusalKind;
  topic: string;
  reason: string;
  reason_code: number;
  at: string;
}

/** The counts and the last refusal of one connection, in its status. */
export interface RefusalCounts {
  refused_publishes: number;
  refused_subscriptions: number;
  last_refusal: Refusal | null;
}

export const NO_REFUSALS: RefusalCounts = { refused_publishes: 0, refused_subscriptions: 0, last_refusal: null };

/**
 * The reason code of a refusal, null for anything else. An MQTT 5 acknowledgement with a reason
 * code of 0x80 or more refuses (0x87: not authorized); MQTT 3.1.1 has only 0x80, and only for a
 * subscription: a 3.1.1 broker acknowledges a publish it drops.
 */
export function refusalCode(error: unknown): number | null {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && code >= 0x80 ? code : null;
}

/** What a connection's broker refused (mqtt.js is loaded: only a connection refuses). */
export function refusal(kind: RefusalKind, topic: string, code: number): Refusal {
  const reason = (loadedMqtt().ReasonCodes as Record<number, string | undefined>)[code]?.toLowerCase() ?? `reason code 0x${code.toString(16)}`;
  return { kind, topic, reason, reason_code: code, at: new Date().toISOString() };
}

/** Adds a refusal to a connection's counts. */
export function countRefusal(counts: RefusalCounts, refused: Refusal): void {
  if (refused.kind === 'publish') counts.refused_publishes++;
  else counts.refused_subscriptions++;
  counts.last_refusal = refused;
}

/**
 * Says what the broker refuses in the metric (every refusal) and the log: a full sync can be refused
 * thousands of times for one ACL rule, so a line a minute per kind and reason.
 */
export class RefusalLog {
  constructor(private readonly deps: { log: FastifyBaseLogger; throttledLog: ThrottledLog; metrics: Metrics | null }) {}

  report(refused: Refusal): void {
    this.deps.metrics?.mqttRefusals.inc({ kind: refused.kind, reason: refused.reason });
    const { kind, topic, reason, reason_code } = refused;
    const what = kind === 'publish' ? 'a publish' : 'a subscription';
    this.deps.throttledLog.write(
      this.deps.log,
      `mqtt-refused:${kind}:${reason_code}`,
      'warn',
      { topic, reason, reason_code },
      `MQTT: the broker refused ${what} (check its ACL)`,
    );
  }
}
