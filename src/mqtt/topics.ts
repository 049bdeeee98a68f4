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
  /** Every person's and zone's state topic (to find the state of an entity deleted while no one published). */
  get stateFilters() {
    return [`${this.base}/person/+/+`, `${this.base}/zone/+/+`];
  }
  /** The person or zone a state topic of this installation belongs to; null for any other topic. */
  entityOfState(topic: string): { kind: 'person' | 'zone'; id: string } | null {
    if (!topic.startsWith(`${this.base}/`)) return null;
    const [kind, id, leaf, ...rest] = topic.slice(this.base.length + 1).split('/');
    return (kind === 'person' || kind === 'zone') && id && leaf && rest.length === 0 ? { kind, id } : null;
  }
  /** The component and object id of a per-entity config topic of this installation; null for any other topic. */
  entityOf(topic: string): { component: string; objectId: string } | null {
    if (!topic.startsWith(`${this.prefix}/`)) return null;
    const [component, mid, objectId, config, ...rest] = topic.slice(this.prefix.length + 1).split('/');
    return mid === this.mid && config === 'config' && rest.length === 0 && component && objectId ? { component, objectId } : null;
  }
}
