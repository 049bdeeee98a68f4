import type { MqttConnection } from '../connection.js';
import { interpretMessage } from '../commands.js';
import { InboundGuard } from '../inbound.js';
import type { ConnectionPart } from './connection.js';
import type { MqttDependencies, MqttPart } from './part.js';
import type { SyncPart } from './sync.js';

/**
 * The commands part: Home Assistant's birth message (a full sync, after a random delay) and mode
 * commands, each topic within its rate limit (inbound.ts).
 */
export class CommandsPart implements MqttPart {
  private birthTimer: NodeJS.Timeout | null = null;
  private readonly inbound: InboundGuard;

  constructor(
    private readonly link: ConnectionPart,
    private readonly sync: SyncPart,
    private readonly deps: MqttDependencies,
  ) {
    this.inbound = new InboundGuard(deps);
  }

  async start(): Promise<void> {
    this.link.events.on('message', this.onMessage);
  }

  async stop(): Promise<void> {
    this.link.events.off('message', this.onMessage);
    if (this.birthTimer) clearTimeout(this.birthTimer);
    this.birthTimer = null;
  }

  /** Subscribes to the command topics on a new connection. */
  subscribe(connection: MqttConnection): Promise<string[]> {
    const topics = this.link.topics!;
    return connection.subscribe([topics.haStatus, topics.modeCommand]);
  }

  private readonly onMessage = (topic: string, payload: string, retained: boolean): void =>
    void this.follow(topic, payload, retained).catch((error: Error) => this.deps.log.warn({ err: error, topic }, 'MQTT message handling failed'));

  private async follow(topic: string, payload: string, retained: boolean): Promise<void> {
    const topics = this.link.topics;
    if (!topics || !this.link.connection) return;
    const command = interpretMessage({ topic, payload, retained }, topics);
    // The discovery part watches its own topics.
    if (command.kind === 'check-config' || !this.inbound.admit(topic, payload, command)) return;
    if (command.kind === 'full-sync') this.answerBirth();
    else if (command.kind === 'set-mode') await this.deps.presence.setMode(command.mode, 'mqtt');
  }

  /**
   * Home Assistant restarted and needs every config and state again. As its docs advise, after a
   * random delay, so many devices do not answer at the same moment; births that arrive meanwhile
   * are answered by the same full sync.
   */
  private answerBirth(): void {
    if (this.birthTimer) return;
    this.birthTimer = setTimeout(() => {
      this.birthTimer = null;
      void this.sync.requestFullSync({ forceConfigs: true });
    }, Math.random() * this.deps.birthDelayMaxMs);
    this.birthTimer.unref();
  }
}
