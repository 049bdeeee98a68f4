import type { FastifyBaseLogger } from 'fastify';
import type { ThrottledLog } from '../http/index.js';
import type { Metrics } from '../ops/index.js';
import { takeTokens, type BucketPolicy, type BucketState } from '../ratelimit/index.js';
import type { Command } from './commands.js';

/**
 * How many commands any client of the broker may have followed, per topic: a burst, then a steady
 * rate. A mode command that changes the mode is a database write, an event and a webhook delivery; a
 * birth message is a full sync of every entity.
 */
const COMMAND_LIMITS: Partial<Record<Command['kind'], BucketPolicy>> = {
  'set-mode': { capacity: 5, refillPerSecond: 1 },
  'full-sync': { capacity: 3, refillPerSecond: 0.1 },
};

/**
 * Decides which inbound messages are acted on: commands within their topic's token bucket. What is
 * refused (an invalid command, one over the limit) is counted and logged through the throttled log,
 * a line per topic and reason a minute, so a flood writes neither the log nor the database.
 */
export class InboundGuard {
  /** Keyed by topic; only the command topics (a fixed few) have buckets. */
  private readonly buckets = new Map<string, BucketState>();

  constructor(private readonly deps: { log: FastifyBaseLogger; throttledLog: ThrottledLog; metrics: Metrics | null }) {}

  /** Whether `command`, which came on `topic`, is to be acted on. */
  admit(topic: string, payload: string, command: Command): boolean {
    if (command.kind === 'ignore') {
      if (command.reason) this.refuse(topic, 'invalid', { payload: payload.slice(0, 64) }, `ignored MQTT message: ${command.reason}`);
      return false;
    }
    const policy = COMMAND_LIMITS[command.kind];
    if (!policy) return true;
    const now = Date.now();
    const take = takeTokens(policy, this.buckets.get(topic), 1, now);
    this.buckets.set(topic, { tokens: take.tokens, updatedAtMs: now });
    if (!take.allowed) {
      this.refuse(topic, 'rate_limited', { burst: policy.capacity, per_second: policy.refillPerSecond }, 'MQTT command refused: over the rate limit');
      return false;
    }
    this.deps.metrics?.mqttCommands.inc({ outcome: 'accepted' });
    return true;
  }

  private refuse(topic: string, outcome: 'invalid' | 'rate_limited', fields: Record<string, unknown>, message: string): void {
    this.deps.metrics?.mqttCommands.inc({ outcome });
    this.deps.throttledLog.write(this.deps.log, `mqtt:${topic}`, 'warn', { topic, ...fields }, message);
  }
}
