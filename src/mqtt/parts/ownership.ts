import type { MqttStatus } from '../connection.js';
import { NO_REFUSALS } from '../refusals.js';
import type { ConnectionPart } from './connection.js';
import type { MqttDependencies, MqttPart } from './part.js';

export type IntegrationStatus = MqttStatus & { enabled: boolean; role: 'leader' | 'standby'; leader_since: string | null };

/**
 * The ownership part: with several instances on one PostgreSQL database one owns the connection and
 * reports it (leadership.ts); every instance answers the installation's status, its own or the
 * owner's. The connection gauges follow this instance's connection.
 */
export class OwnershipPart implements MqttPart {
  constructor(
    private readonly link: ConnectionPart,
    private readonly deps: MqttDependencies,
  ) {}

  async start(): Promise<void> {
    this.link.events.on('status', this.onStatus);
  }

  async stop(): Promise<void> {
    this.link.events.off('status', this.onStatus);
  }

  /**
   * The installation's connection: this instance's own when it owns MQTT, else as the owner last
   * reported it (read every 2 s), so every instance behind a load balancer says the same.
   */
  status(): IntegrationStatus {
    const { owner, ...role } = this.deps.ownership?.status() ?? { role: 'leader' as const, leader_since: null, owner: null };
    // An owner of an earlier release reports no client_id_conflict and no refusals.
    if (owner) return { client_id_conflict: false, ...NO_REFUSALS, ...owner, role: role.role };
    return { ...this.link.ownStatus(), ...role };
  }

  private readonly onStatus = (status: MqttStatus & { enabled: boolean }, current: boolean): void => {
    this.deps.metrics?.mqttConnected.set(status.connected ? 1 : 0);
    this.deps.metrics?.mqttClientIdConflict.set(status.client_id_conflict ? 1 : 0);
    // A closing connection's last word must not overwrite what its successor reported.
    if (current) this.deps.ownership?.report(status);
  };
}
