/** Every topic of one installation (docs/mqtt.md): state under `{root}/{mid}/...`, discovery under `{prefix}/...`. */
export class Topics {
  readonly base: string;

  constructor(
    readonly root: string,
    readonly mid: string,
    readonly prefix: string,
    /** Home Assistant's birth topic: configured in HA apart from the discovery prefix. */
    readonly haStatus = 'homeassistant/status',
  ) {
    this.base = `${root}/${mid}`;
  }

  get availability() {
    return `${this.base}/availability`;
  }
  personPresence(id: string) {
    return `${this.base}/person/${id}/presence`;
  }
  personAttributes(id: string) {
    return `${this.base}/person/${id}/attributes`;
  }
  personTracker(id: string) {
    return `${this.base}/person/${id}/tracker`;
  }
  zoneOccupancy(id: string) {
    return `${this.base}/zone/${id}/occupancy`;
  }
  get fall() {
    return `${this.base}/fall`;
  }
  get anomaly() {
    return `${this.base}/anomaly`;
  }
  get health() {
    return `${this.base}/system/health`;
  }
  get mode() {
    return `${this.base}/system/mode`;
  }
  get modeCommand() {
    return `${this.base}/system/mode/set`;
  }
  discovery(component: 'binary_sensor' | 'sensor' | 'select' | 'device_tracker', objectId: string) {
    return `${this.prefix}/${component}/${this.mid}/${objectId}/config`;
  }
  /** The one config of device-based discovery (HA 2024.11+): every entity as a component. */
  get deviceDiscovery() {
    return `${this.prefix}/device/${this.mid}/config`;
  }
  /** Matches every per-entity discovery config of this installation (to find ghosts). */
  get allDiscovery() {
    return `${this.prefix}/+/${this.mid}/+/config`;
  }
  /** Every discovery config of this installation, in either form (to find ghosts, to clean up). */
  get discoveryFilters() {
    return [this.allDiscovery, this.deviceDiscovery];
  }
  /**
   * A retained marker whose payload is the generation of the record of published topics: when the
   * broker still has it, it still holds what the record says (a broker that lost its retained
   * messages, or another broker, has not).
   */
  get generation() {
    return `${this.base}/generation`;
  }
  /** Whether a topic is one of this installation's discovery configs (either form). */
  isDiscovery(topic: string): boolean {
    return topic === this.deviceDiscovery || this.entityOf(topic) !== null;
  }
  /** The component and object id of a per-entity config topic of this installation; null for any other topic. */
  entityOf(topic: string): { component: string; objectId: string } | null {
    if (!topic.startsWith(`${this.prefix}/`)) return null;
    const [component, mid, objectId, config, ...rest] = topic.slice(this.prefix.length + 1).split('/');
    return mid === this.mid && config === 'config' && rest.length === 0 && component && objectId ? { component, objectId } : null;
  }
}
