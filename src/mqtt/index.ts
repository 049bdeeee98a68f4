import type { IntegrationSettings } from '../settings/index.js';
import type { MqttSettings } from './connection.js';
import { CleanupPart } from './parts/cleanup.js';
import { CommandsPart } from './parts/commands.js';
import { ConnectionPart } from './parts/connection.js';
import { DiscoveryPart, type DiscoveryAnswer } from './parts/discovery.js';
import { OwnershipPart, type IntegrationStatus } from './parts/ownership.js';
import type { MqttDependencies, MqttPart } from './parts/part.js';
import { SyncPart } from './parts/sync.js';

export { MqttLeadership } from './leadership.js';
export { cleanupRefusal, clearInstallation } from './cleanup.js';
export { describeMqttError } from './connection.js';

/**
 * The parts of the integration, one per concern (parts/), and how they reach each other. Listed in
 * start order; they stop in the reverse order, so the connection closes after the parts that use it
 * let go of it, and ownership still hears its last status.
 */
function composeParts(deps: MqttDependencies) {
  const connection: ConnectionPart = new ConnectionPart(deps, {
    leave: (closing, old, next) => cleanup.leave(closing, old, next),
    offline: (closing) => sync.publishAvailability(closing, 'offline'),
  });
  const sync: SyncPart = new SyncPart(connection, deps, {
    beforeLoad: (connected) => commands.subscribe(connected),
    afterLoad: (connected) => discovery.watch(connected),
    afterSync: () => cleanup.sweepSoon(),
  });
  const commands = new CommandsPart(connection, sync, deps);
  const discovery = new DiscoveryPart(connection, sync, deps, () => cleanup.sweepSoon());
  const cleanup = new CleanupPart(connection, sync, deps);
  const ownership = new OwnershipPart(connection, deps);
  const parts: MqttPart[] = [ownership, connection, sync, commands, discovery, cleanup];
  return { parts, connection, discovery, cleanup, ownership };
}

/**
 * The MQTT integration (after Zigbee2MQTT's extensions): mirrors the service's state to retained
 * topics, publishes Home Assistant discovery, answers Home Assistant's birth message, accepts mode
 * commands, and reconnects with backoff. It never queues while disconnected: on every (re)connect it
 * republishes the whole current state from the database.
 */
export class MqttIntegration {
  private readonly parts: ReturnType<typeof composeParts>;
  private running = false;

  constructor(deps: MqttDependencies) {
    this.parts = composeParts(deps);
  }

  get clientId(): string {
    return this.parts.connection.clientId;
  }

  status(): IntegrationStatus {
    return this.parts.ownership.status();
  }

  /** Applies new settings at once (see ConnectionPart.configure). */
  configure(settings: IntegrationSettings['mqtt']): Promise<void> {
    return this.parts.connection.configure(settings);
  }

  /** Starts every part (following the event log among them) and connects with the saved settings. */
  async start(settings: IntegrationSettings['mqtt']): Promise<void> {
    if (!this.running) {
      this.running = true;
      for (const part of this.parts.parts) await part.start();
    }
    await this.configure(settings);
  }

  /**
   * Stops every part and closes the connection, saying `offline` first unless another instance may
   * already have taken over (ownership lost): its `online` must stand.
   */
  async stop({ offline = true } = {}): Promise<void> {
    this.running = false;
    for (const part of [...this.parts.parts].reverse()) await part.stop({ offline });
  }

  /** Connects once with candidate settings (Test Connection); `detailed` errors only for the saved broker. */
  test(settings: MqttSettings, options: { detailed: boolean }) {
    return this.parts.connection.test(settings, options);
  }

  cleanupInstallation(installation: string): Promise<number> {
    return this.parts.cleanup.cleanupInstallation(installation);
  }

  publishDiscovery(): Promise<DiscoveryAnswer> {
    return this.parts.discovery.publishDiscovery();
  }
}
